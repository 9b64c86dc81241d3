"""``runner doctor``'s arguments (none)."""

DESCRIPTION = ("Show what this host has for building and running entries: the container engine, "
               "debootstrap, free disk, GPUs and the NVIDIA container runtime, CPU energy counters, "
               "Python and root.")


def register(parser) -> None:
    pass
