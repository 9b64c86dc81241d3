"""``runner images``'s arguments."""

DESCRIPTION = ("The base images entries build on, one recipe per folder of images/: a debootstrap "
               "recipe built here, or an upstream image pulled by its pinned digest.")


def register(parser) -> None:
    sub = parser.add_subparsers(dest="images_command", metavar="ACTION", required=True)
    lister = sub.add_parser("list", help="show each recipe, its tag and whether it is built",
                            description="Show each base image recipe, its tag or pinned reference, and "
                            "whether the engine has it.")
    lister.set_defaults(func="list_images")
    builder = sub.add_parser("build", help="build (or pull by digest) one base image",
                             description="Build one base image from its recipe (debootstrap takes about a "
                             "minute), or pull it by its pinned digest.")
    builder.add_argument("name", help="recipe folder name, e.g. python3.11-bookworm")
    builder.add_argument("--force", action="store_true", help="rebuild even if the tag exists")
    builder.set_defaults(func="build_image")
