"""Egress allowlists on the microvm driver: test_gvisor_network.py's cases,
run on `microvm` through a `wall` fixture of this module's own.

An allowlisted microVM gets a netns (a holder process) linked by the net
module before QEMU starts; there the veth's inside end and a tap are
bridged, and the guest's virtio-net takes the veth's addresses
(runtime/drivers/microvm_net.c, vm/net.c), so the nft rules, DNS responder
and proxy outside are the container driver's.  TCG guests: the module runs
only when a microvm profile is wanted (make test-microvm).

Only loopback and the test namespaces are ever contacted."""
import pytest

from conftest import wanted_microvm

if not wanted_microvm():
    pytest.skip("microVM tests boot guests (seconds of CPU each under TCG): run them with "
                "make test-microvm or SANDBOXD_TEST_PROFILES=microvm", allow_module_level=True)

# The cases and their fixtures (world, gnetd, cl, registry); `wall` below
# replaces gvisor's.
from test_gvisor_network import *  # noqa: F401,F403,E402
from test_gvisor_network import Wall  # noqa: E402


@pytest.fixture(scope="module")
def wall():
    # golden states stay on (the default): an allowlisted session must
    # never be handed a restored (network none) guest
    return Wall("microvm", {"SANDBOXD_MICROVM_ACCEL": "tcg"}, "microvm")
