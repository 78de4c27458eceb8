# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run the simulator: ``python /opt/sglang/simulator/sglang_simulator --config FILE [--flag value ...]`` (the
package's directory, as the service and the launcher start it) or ``python -m sglang_simulator ...``."""

import os
import sys

if __name__ == "__main__":
    if not __package__:  # python DIR: Python put DIR itself first on sys.path; the package is imported from above it
        HERE = os.path.dirname(os.path.abspath(__file__))
        sys.path[:] = [os.path.dirname(HERE)] + [path for path in sys.path if os.path.abspath(path or ".") != HERE]
    from sglang_simulator.lifecycle import main
    from sglang_simulator.signals import ShutdownRequested

    try:
        sys.exit(main())
    except ShutdownRequested:  # a signal before the simulator took over (e.g. while parsing)
        sys.exit(0)
