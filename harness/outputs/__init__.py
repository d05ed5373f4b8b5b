"""Run outputs: the files written to --out and the terminal summary."""
