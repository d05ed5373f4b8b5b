import sys

try:
    from .cli import entry
except KeyboardInterrupt:  # Ctrl-C while the command is still loading: the same one line and code
    sys.stderr.write("interrupted\n")
    raise SystemExit(130) from None

entry()
