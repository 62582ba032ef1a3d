# SPDX-License-Identifier: BSD-3-Clause
"""Action terms: policy output → actuator controls (`batonlab.env.actions.ActionTerm`).

Installed as `batonlab.actions`; each module holds one family of terms, all re-exported here for task configs."""

from batonlab.actions.joint import JointAction, JointEffortAction, JointPositionAction, JointVelocityAction
from batonlab.actions.ik import IKResidualAction, TorchChain
from batonlab.actions.command_layer import ScriptedWholeBodyAction, WholeBodyCommandAction, WholeBodyPolicyAction
from batonlab.actions.tool_step import ToolStepAction
