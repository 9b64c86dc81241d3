"""``runner drift``'s arguments."""

from runner.cli.arguments import slurm

DESCRIPTION = ("Rebuild the entry behind each archived bundle (default: results/archive/"
               "*.tar.gz) and report changes to its files, base image and packages; with --rerun, "
               "reproduce it and compare TTA.")


def register(p) -> None:
    p.add_argument("bundles", nargs="*", help="bundles (.tar.gz or folders)")
    p.add_argument("--entry", help="entry folder (default: entries/<the bundle's entry>)")
    p.add_argument("--rerun", action="store_true", help="also reproduce and compare TTA")
    p.add_argument("--tolerance", type=float, default=0.25,
                   help="relative TTA change that counts as drift (default 0.25)")
    slurm.add_arguments(p)
    p.add_argument("--fail-on-drift", action="store_true", help="exit 1 when anything drifted")
    p.add_argument("--json", action="store_true", help="print each bundle's changes as JSON (progress to stderr)")
