"""The exit codes of ``harness`` commands (README "Exit codes"); one home for the CLI and the run."""

EXIT_OK = 0
EXIT_FAILED_JUDGMENTS = 1
EXIT_USER_ERROR = 2
EXIT_CACHE_MISSES = 3
EXIT_BUDGET = 4
#: `harness agreement --min-kappa/--min-spearman`: the judge agrees with the labels less than asked
EXIT_GATE = 5
EXIT_INTERRUPTED = 130
