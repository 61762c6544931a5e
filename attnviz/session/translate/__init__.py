"""The Translate tab's documents: the decode, its changes, the quantities and the jobs it runs."""
