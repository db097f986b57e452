"""Source against lake: verification, verification at a cursor, and lineage descriptions."""
