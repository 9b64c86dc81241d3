"""``runner audit``'s arguments."""

from runner.cli.argtypes import trusted_keys_argument

DESCRIPTION = ("Verify the bundle (every check of `runner verify`; one that fails is not "
               "replayed), then rebuild the entry image from the bundle's own entry files, re-evaluate the "
               "crossing checkpoint and the final model with the runner's evaluator on your own data, and "
               "require the bundle's predictions (exactly on CPU; within 0.1% of items on GPUs).")


def register(parser) -> None:
    parser.add_argument("bundle", help="a result folder or its .tar.gz")
    parser.add_argument("--replay", action="store_true", help="re-evaluate the crossing checkpoint and final model")
    trusted_keys_argument(parser)
    parser.add_argument("--json", action="store_true", help="print verify's report and the replay's checks as JSON")
