"""The ``lcm`` entry point (``lossless.__main__``): a Ctrl-C while the command line loads is said, not a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points

from lossless._version import VERSION

# Runs the entry point with every import of click interrupted, as a Ctrl-C during start-up would be.
_INTERRUPTED_START = """
import sys
class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "click":
            raise KeyboardInterrupt
sys.meta_path.insert(0, Interrupt())
sys.argv = ["lcm", *sys.argv[1:]]
from lossless.__main__ import main
main()
"""


def test_a_ctrl_c_while_the_command_line_loads_exits_130_with_what_was_kept() -> None:
    done = subprocess.run([sys.executable, "-c", _INTERRUPTED_START, "stats"], capture_output=True, text=True)
    assert done.returncode == 130, done.stderr
    assert done.stderr.startswith("interrupted:") and "run the same command again" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_with_json_the_interruption_is_a_json_error_too() -> None:
    done = subprocess.run([sys.executable, "-c", _INTERRUPTED_START, "stats", "--json"], capture_output=True, text=True)
    assert done.returncode == 130 and "Traceback" not in done.stderr
    assert json.loads(done.stdout)["error"]["type"] == "Interrupted"


def test_python_m_lossless_is_lcm() -> None:
    done = subprocess.run([sys.executable, "-m", "lossless", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and VERSION in done.stdout


def test_the_lcm_script_starts_at_the_entry_point() -> None:
    (script,) = entry_points(group="console_scripts", name="lcm")
    assert script.value == "lossless.__main__:main"
