"""``runner build``'s arguments."""

DESCRIPTION = ("Build ENTRY's image hermetically (no network; every wheel checked against the lock's "
               "hashes), record its SBOM and print the tag, the base image and the framework versions.")


def register(parser) -> None:
    parser.add_argument("entry", help="entry folder, e.g. entries/mnist-cnn-cpu")
    parser.add_argument("--no-cache", action="store_true", help="rebuild every layer")
    parser.add_argument("-v", "--verbose", action="store_true", help="print the build output")
    parser.add_argument("--sbom", action="store_true", help="list every package in the image")
