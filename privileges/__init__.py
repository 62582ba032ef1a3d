# SPDX-License-Identifier: BSD-3-Clause
"""Privileges: simulation-only help faded by the privilege level λ (forces, relaxed contacts, assists, head starts).

Installed as `batonlab.privileges`; each module holds one family of terms, all re-exported here for task configs."""

from batonlab.privileges.door_assist import HingeAssist
from batonlab.privileges.head_start import HeadStart
from batonlab.privileges.relaxed_contacts import DISABLED_MARGIN, RelaxedContacts, add_switchable_pair
from batonlab.privileges.virtual_forces import GRAVITY, AttractionForce, VirtualForceAction
