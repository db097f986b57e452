"""Snapshots, read from the source consistent with the binlog: the chunked watermark snapshot
(:mod:`.initial`), its consistent binlog position (:mod:`.position`), SELECT values in the decoder's
value contract (:mod:`.values`) and a table re-snapshot at a binlog point (:mod:`.resnapshot`).
"""
