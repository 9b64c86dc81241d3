"""``runner bundle``'s arguments."""

DESCRIPTION = ("A bundle is a result folder plus bundle/manifest.json (every file's "
               "sha256) and bundle/statement.dsse.json (the signed claim). 'runner reproduce' makes it.")


def register(p) -> None:
    sub = p.add_subparsers(dest="bundle_command", metavar="ACTION", required=True)
    s = sub.add_parser("sign", help="sign again a run this runner measured, as it measured it",
                       description="Write the result folder's manifest (every file's sha256) and sign the "
                       "claim with your key: only a run this runner measured (its record under the runner's "
                       "home, measured/<run_id>.json), every file as measured; a folder bundled before is "
                       "also signed again only as it was signed.")
    s.add_argument("result_dir", help="a result folder, e.g. results/mnist-cnn-cpu/<run_id>")
    s.set_defaults(func="sign")
    k = sub.add_parser("pack", help="write the bundle as a byte-reproducible .tar.gz",
                       description="Write a bundled result folder as a byte-reproducible "
                       "<entry>-<run_id>.tar.gz, the name the archive (results/archive/) uses.")
    k.add_argument("result_dir", help="a bundled result folder")
    k.add_argument("-o", "--out", metavar="DIR",
                   help="folder to write <entry>-<run_id>.tar.gz into (default: beside the result folder)")
    k.set_defaults(func="pack_command")
