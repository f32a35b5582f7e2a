"""Real per-second request counts, gzipped, one integer per line (see :mod:`traces.catalog`)."""
