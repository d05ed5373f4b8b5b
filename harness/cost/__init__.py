"""Judge cost: offline token counting, price tables, the pre-run estimate and the in-run budget."""
