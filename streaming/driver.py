"""The file `spark-submit` runs: the `placement-engine` command line under `spark-submit`.

`spark-submit` starts a Python application from a `.py` file, not from a module or a console
script. This file is that entry point, shipped inside the package so nobody writes a driver by hand:

    spark-submit --master spark://HOST:7077 --py-files placement_engine.zip \\
      "$(python -m streaming.driver)" replay --conf FILE --events PATH --out DIR

Run as a module (`python -m streaming.driver`), it prints its own path, for that command line. Run
as a file, it runs `streaming.cli.main` with the arguments after the file name. Python puts the
directory of a file it runs first on `sys.path`: here that is the `streaming/` package directory, whose
modules (`config`, `settings`, `report`, ...) would then shadow top-level modules of the same name, so
it is taken off before anything else is imported.
"""

import sys
from pathlib import Path


def main() -> int:
    """Run the command line given after the file name; the process's exit status."""
    from streaming.cli import main as cli_main

    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    if sys.path and sys.path[0] and Path(sys.path[0]).resolve() == here:
        del sys.path[0]
    if __spec__ is not None:  # `python -m streaming.driver`: say where the file is
        print(Path(__file__).resolve())
        sys.exit(0)
    sys.exit(main())
