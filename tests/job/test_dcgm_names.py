"""dcgm-exporter field names across DCGM's renaming, from the emitters' own source.

dcgm-exporter 4.9 (DCGM 4.7) is not in the upstream snapshot available here (dcgm-exporter ends
at 4.5.3-4.8.2 plus d5e5f51, "Rename Hostname label to hostname"; DCGM at v4.6.0). What DCGM
v4.6.0 already ships is the renaming itself: ``dcgmlib/dcgm_fields.h`` ends with "Deprecated:
renamed per DCGM Field Naming Standard (see dcgmlib/dcgm_field_naming.py)" and one
``#define OLD NEW`` per renamed field, and ``dcgm_field_naming.py`` gives the grammar
``prefix "_" domain "_" subsystem "_" property ["_" unit] ["_" suffix]`` with unit ``BYTES`` and
suffixes ``RATIO``/``TOTAL``. 13 of the 26 fields in dcgm-exporter's ``etc/default-counters.csv``
(main, d5e5f51) are renamed there (verbatim below); the framebuffer fields are not yet (v4.6.0
still defines ``DCGM_FI_DEV_FB_USED 252`` "Used Frame Buffer in MB"), only
``DCGM_FI_DEV_FB_USED_PERCENT`` → ``DCGM_FI_DEV_FB_USED_RATIO``. So the framebuffer names are
checked here against the grammar's shape (``DCGM_FI_DEV_FB_USED_BYTES``), the reader finds
them by role, and ``--dcgm-field`` configures anything else (docs/dcgm.md).
"""

from __future__ import annotations

import pytest

from stormotel import schema

#: DCGM v4.6.0 dcgmlib/dcgm_fields.h, the renamed defaults of dcgm-exporter's default-counters.csv.
RENAMED_DEFAULTS = {
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": "DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL",
    "DCGM_FI_DEV_GPU_TEMP": "DCGM_FI_DEV_GPU_TEMP_CELSIUS",
    "DCGM_FI_DEV_GPU_UTIL": "DCGM_FI_DEV_GPU_UTIL_RATIO",
    "DCGM_FI_DEV_MEMORY_TEMP": "DCGM_FI_DEV_MEMORY_TEMP_CELSIUS",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "DCGM_FI_DEV_PCIE_REPLAY_TOTAL",
    "DCGM_FI_DEV_POWER_USAGE": "DCGM_FI_DEV_BOARD_POWER_WATTS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": "DCGM_FI_DEV_ROW_REMAP_FAILED",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL",
    "DCGM_FI_DEV_XID_ERRORS": "DCGM_FI_DEV_XID_ERROR",
    "DCGM_FI_DRIVER_VERSION": "DCGM_FI_SYSTEM_DRIVER_VERSION",
    "DCGM_FI_PROF_DRAM_ACTIVE": "DCGM_FI_PROF_DRAM_UTIL_RATIO",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "DCGM_FI_PROF_TENSOR_UTIL_RATIO",
}
#: dcgm-exporter etc/default-counters.csv (4.5.3-4.8.2 and main d5e5f51), "# Memory usage".
EXPORTER_FB_DEFAULTS = {"DCGM_FI_DEV_FB_FREE": "free", "DCGM_FI_DEV_FB_USED": "used",
                        "DCGM_FI_DEV_FB_RESERVED": "reserved"}


@pytest.mark.parametrize("name", [*RENAMED_DEFAULTS, *RENAMED_DEFAULTS.values(),
                                  "DCGM_FI_DEV_FB_USED_PERCENT", "DCGM_FI_DEV_FB_USED_RATIO"])
def test_renamed_non_framebuffer_fields_are_never_read_as_memory(name: str) -> None:
    assert schema.dcgm_role_of(name) is None
    assert schema.dcgm_unit_of_name(name) is None


@pytest.mark.parametrize(("name", "role"), EXPORTER_FB_DEFAULTS.items())
def test_exporter_default_framebuffer_fields_are_found_with_the_unit_left_to_the_values(
        name: str, role: str) -> None:
    assert schema.dcgm_role_of(name) == role
    assert schema.dcgm_unit_of_name(name) is None  # MiB up to 4.8.x, bytes in 4.9: by size


@pytest.mark.parametrize("role", schema.DCGM_FB_ROLES)
def test_naming_standard_framebuffer_names_are_found_in_bytes(role: str) -> None:
    """``DCGM_FI`` ``DEV`` ``FB`` <property> ``BYTES``: the grammar's shape for a framebuffer
    field in bytes (the name DCGM's standard gives it; not yet confirmed by a release)."""
    name = f"DCGM_FI_DEV_FB_{role.upper()}_BYTES"
    assert schema.dcgm_role_of(name) == role
    assert schema.dcgm_unit_of_name(name) == 1
