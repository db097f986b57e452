"""Generate the Python modules of canal's ``.proto`` files (``proto/``) with ``grpc_tools.protoc``.

Used by the wheel build (``setup.py``), by an editable install (into ``canalnet/_pb/``) and, when
neither left the modules behind, by :mod:`.protocol` at first import (into a cache directory).
Standard library only, so ``setup.py`` can load it by path before the package is installed.

Both files declare an enum value ``HEARTBEAT`` in the package ``com.alibaba.otter.canal.protocol``
(``PacketType.HEARTBEAT`` and ``EntryType.HEARTBEAT``). Java keeps one descriptor pool per file;
Python's generated code puts every file into one default pool, where the second file is refused
as a duplicate symbol. So each generated module is rewritten to build its file into a pool of its
own (one line of the generated code); nothing else of the generated code changes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent / "proto"
PROTO_FILES = ("CanalProtocol.proto", "EntryProtocol.proto")
MODULES = ("CanalProtocol_pb2", "EntryProtocol_pb2")
_DEFAULT_POOL = "_descriptor_pool.Default().AddSerializedFile("
_OWN_POOL = "_descriptor_pool.DescriptorPool().AddSerializedFile("


def generate(out_dir: str | os.PathLike[str], python: str | None = None) -> list[Path]:
    """Write ``CanalProtocol_pb2.py``, ``EntryProtocol_pb2.py`` and an ``__init__.py`` into ``out_dir``.

    :param out_dir: the target directory (created).
    :param python: the interpreter whose ``grpc_tools`` runs protoc (default: this one).
    :return: the files written.
    :raises RuntimeError: protoc failed or ``grpc_tools`` is not installed (its output says so).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        for proto in PROTO_FILES:  # one run per file: one run with both refuses the shared symbol
            cmd = [python or sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_DIR}",
                   f"--python_out={tmp}", proto]  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"protoc failed for {proto}: {done.stderr.strip() or done.stdout.strip()}")
        for module in MODULES:
            text = (Path(tmp) / f"{module}.py").read_text(encoding="utf-8")
            if text.count(_DEFAULT_POOL) != 1:
                raise RuntimeError(f"unexpected generated code in {module}.py: no single {_DEFAULT_POOL}")
            target = out / f"{module}.py"
            target.write_text(text.replace(_DEFAULT_POOL, _OWN_POOL), encoding="utf-8")
            written.append(target)
    init = out / "__init__.py"
    init.write_text('"""Generated from canal\'s .proto files (see ../proto/README.md); not committed."""\n')
    written.append(init)
    return written


if __name__ == "__main__":
    for path in generate(sys.argv[1] if len(sys.argv) > 1 else PROTO_DIR.parent / "_pb"):
        print(path)
