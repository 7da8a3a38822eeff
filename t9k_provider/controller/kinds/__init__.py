"""One module per kind, from the typed job (`t9k_provider.jobs`) to what the engine runs; see `registry`."""
