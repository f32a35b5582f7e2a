"""Speech recognition with PocketSphinx 5 and its bundled US English model."""
