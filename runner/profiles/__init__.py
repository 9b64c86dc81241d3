"""Hardware profiles: the hardware an entry's claim belongs to, matched against a host."""

from runner.profiles.cost import cost_usd, price_fields
from runner.profiles.matching import Mismatch, describe_pattern, hardware_record, match, match_nodes, require_match
from runner.profiles.profile import (
    ContainerLimits,
    CpuRules,
    GpuRules,
    Price,
    Profile,
    list_profiles,
    load_profile,
    load_profile_file,
    profile_from_dict,
)

__all__ = [
    "ContainerLimits", "CpuRules", "GpuRules", "Mismatch", "Price", "Profile",
    "cost_usd", "describe_pattern", "hardware_record", "list_profiles", "load_profile", "load_profile_file",
    "match", "match_nodes", "price_fields", "profile_from_dict", "require_match",
]
