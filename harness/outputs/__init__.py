"""Run outputs: the files written to --out (writer, merge, reading a run back) and the table layout the terminal uses."""
