"""Runs a command in the foreground of the terminal and records its exit status in a file.

tmux does not always learn a dead pane's exit status, so the chat tests read it from here.
Next to it (``STATUS.tty``) goes whether the terminal was left in canonical (cooked) mode,
so a test can check that the command gave the terminal back.
The wrapper itself survives the Ctrl-C meant for the command (a no-op handler, which
exec resets to the default in the child).
"""

import os
import signal
import subprocess
import sys
import termios

signal.signal(signal.SIGINT, lambda *_: None)
status_file, argv = sys.argv[1], sys.argv[2:]
code = subprocess.call(argv)
try:
    cooked = bool(termios.tcgetattr(0)[3] & termios.ICANON)
except termios.error:
    cooked = False
with open(status_file + ".tty", "w") as f:
    f.write("cooked" if cooked else "raw")
tmp = status_file + ".tmp"
with open(tmp, "w") as f:
    f.write(str(code))
os.replace(tmp, status_file)
