# SPDX-License-Identifier: BSD-3-Clause
"""An arm's kinematic chain read from a compiled MuJoCo model (what the manifest carries for `ik_residual`)."""

from __future__ import annotations

import mujoco
import numpy as np

from batonlab.deploy.kinematics import ChainLink, KinematicChain


def chain_from_model(model: mujoco.MjModel, base: str, tip_site: str, joints: tuple[str, ...]) -> KinematicChain:
    """The chain from body `base` to site `tip_site`, whose hinges must be exactly `joints` in order.

    Raises:
        ValueError: The site is not below the base, a body on the way has more than one joint or a
            joint that is not a hinge, or the hinges differ from `joints`.
    """
    base_id = model.body(base).id
    site = model.site(tip_site)
    bodies = []
    body = int(site.bodyid[0])
    while body != base_id:
        if body == 0:
            raise ValueError(f"site '{tip_site}' is not below body '{base}'")
        bodies.append(body)
        body = int(model.body_parentid[body])
    links = []
    for body in reversed(bodies):
        count, first = int(model.body_jntnum[body]), int(model.body_jntadr[body])
        if count > 1:
            raise ValueError(f"body '{model.body(body).name}' has {count} joints; a chain link has one hinge at most")
        joint = None
        axis, anchor = (0.0, 0.0, 1.0), (0.0, 0.0, 0.0)
        if count == 1:
            if model.jnt_type[first] != mujoco.mjtJoint.mjJNT_HINGE:
                raise ValueError(f"joint '{model.joint(first).name}' is not a hinge: an IK chain holds hinges only")
            joint = model.joint(first).name
            axis, anchor = _floats(model.jnt_axis[first]), _floats(model.jnt_pos[first])
        links.append(ChainLink(pos=_floats(model.body_pos[body]), quat=_floats(model.body_quat[body]), joint=joint,
                               axis=axis, anchor=anchor))
    chain = KinematicChain(base=base, links=tuple(links), tip=tip_site, tip_pos=_floats(model.site_pos[site.id]),
                           tip_quat=_floats(model.site_quat[site.id]))
    if chain.joints != tuple(joints):
        raise ValueError(f"the chain from '{base}' to '{tip_site}' moves joints {list(chain.joints)}, not {list(joints)}")
    return chain


def _floats(values) -> tuple[float, ...]:
    return tuple(float(v) for v in np.asarray(values, dtype=np.float64))
