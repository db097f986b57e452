"""lake layer."""
