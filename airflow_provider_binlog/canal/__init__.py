"""canal layer."""
