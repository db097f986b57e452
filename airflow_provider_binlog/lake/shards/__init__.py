"""Sharded sources: several source tables or destinations filling one lake table."""
