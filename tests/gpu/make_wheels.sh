#!/usr/bin/env bash
# Make the folder of wheels tests/gpu/acceptance.sh installs on a GPU machine without a
# package index (docs/gpu.md, "The GPU acceptance"). Run it on a machine that has the index,
# from the repository root:
#
#     tests/gpu/make_wheels.sh [DIR]        # DIR defaults to .gpu-wheels (git-ignored)
#
# Only what the runner imports and such a machine lacks: its image has Python 3.12, torch,
# numpy, scipy, matplotlib, jinja2, protobuf, requests, attrs, pyyaml, rich, nvidia-ml-py and
# pytest, but not the packages below. Each is pinned to one version (two versions of a package
# stop pip's --no-deps install), those the runner is tested with (the development .venv), and
# fetched without its dependencies: the list is closed by hand over each wheel's Requires-Dist,
# and the check at the end names any requirement neither here nor in ALREADY_THERE. Plus
# Debian 12's bubblewrap .deb, which the acceptance unpacks with dpkg -x where bwrap is missing.
# Everything that travels to the GPU machine shares 64 MiB with the checkout (about 32 MiB), so
# the folder must stay under 40 MiB; it is about 12 MiB.
set -euo pipefail

DIR=${1:-.gpu-wheels}
LIMIT_MIB=40

# The runner's own dependencies (pyproject.toml) missing there, then what they need.
WHEELS=(
    docker==7.2.0                       # runner.engine (imported by every engine path)
    jsonschema==4.26.0                  # manifests and profiles
    jsonschema-specifications==2025.9.1
    referencing==0.37.0
    rpds-py==2026.9.1
    securesystemslib==1.6.0             # signing and verifying bundles
    cryptography==50.0.2                # securesystemslib[crypto], runner.keys
    cffi==2.1.1
    pycparser==3.12
    zstandard==0.25.0                   # the information budget
    in-toto-attestation==0.9.3          # the bundle's in-toto Statement (pinned in pyproject.toml)
)
# Distributions the GPU machine's image already has (docs/gpu.md; its package list).
ALREADY_THERE="attrs certifi charset-normalizer idna jinja2 markupsafe matplotlib numpy nvidia-ml-py packaging \
protobuf pytest pyyaml requests rich scipy six typing-extensions urllib3"

mkdir -p "$DIR"
rm -f "$DIR"/*.whl "$DIR"/*.deb
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$DIR" "${WHEELS[@]}"
(cd "$DIR" && apt-get download -q bubblewrap >/dev/null)

# Each wheel's requirements (no extras, none for another interpreter) must be in the folder or there.
norm() { tr 'A-Z_.' 'a-z--'; }
have=" $ALREADY_THERE "
for w in "$DIR"/*.whl; do
    have+="$(basename "$w" | cut -d- -f1 | norm) "
done
missing=0
for w in "$DIR"/*.whl; do
    while read -r req; do
        [ -n "$req" ] || continue
        if [[ " $have " != *" $req "* ]]; then
            echo "missing: $req (needed by $(basename "$w"))" >&2
            missing=1
        fi
    done < <(unzip -p "$w" '*.dist-info/METADATA' | grep '^Requires-Dist:' | grep -v 'extra ==' \
             | grep -v -E "platform_python_implementation == .PyPy|python_version < .3\.1[01]|sys_platform == .win32|platform_system == .Windows" \
             | sed -E 's/^Requires-Dist: *([A-Za-z0-9_.-]+).*/\1/' | norm)
done

ls -l "$DIR"
bytes=$(du -cb "$DIR"/*.whl "$DIR"/*.deb | tail -1 | cut -f1)
files=("$DIR"/*.whl "$DIR"/*.deb)
echo "$DIR: ${#files[@]} files, $((bytes / 1024 / 1024)) MiB ($bytes bytes)"
if [ "$bytes" -gt $((LIMIT_MIB * 1024 * 1024)) ]; then
    echo "$DIR is over $LIMIT_MIB MiB" >&2
    exit 1
fi
exit "$missing"
