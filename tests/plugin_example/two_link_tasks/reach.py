"""`two_link_reach`: a planar two-link arm brings its fingertip to a commanded point."""

import mujoco
import torch

from batonlab import events, observations
from batonlab.actions import JointPositionAction
from batonlab.commands import UniformPositionCommand
from batonlab.env.cfg import (ActionTermCfg, CommandTermCfg, EventTermCfg, ObsGroupCfg, ObsTermCfg, RewardTermCfg,
                              SceneCfg, TaskCfg, TermCfg)
from batonlab.rewards import regularizers, tracking
from batonlab.rl.cfg import RunnerCfg

XML = """<mujoco model="two_link"><compiler angle="radian"/><option timestep="0.005"/>
  <default><joint axis="0 0 1" range="-2.6 2.6" damping="0.2"/><position kp="10" kv="0.5"/></default>
  <worldbody><light pos="0 0 2"/><camera name="overview" pos="0.25 0 1.2"/>
    <geom type="plane" size="1 1 0.05" pos="0 0 -0.05"/>
    <body name="upper"><joint name="shoulder"/><geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02"/>
      <body name="fore" pos="0.3 0 0"><joint name="elbow"/><geom type="capsule" fromto="0 0 0 0.25 0 0" size="0.02"/>
        <site name="tip" pos="0.25 0 0"/></body></body>
    <body name="target" mocap="true"><geom type="sphere" size="0.02" contype="0" conaffinity="0" rgba="0 1 0 1"/></body>
  </worldbody>
  <actuator><position joint="shoulder"/><position joint="elbow"/></actuator>
  <sensor><framepos name="tip_pos" objtype="site" objname="tip"/></sensor>
</mujoco>"""
JOINTS = ("shoulder", "elbow")
TIP = {"command": "target", "sensor": "tip_pos"}


def joint_vel_at_target_l2(env, command: str, sensor: str, radius: float, joints: tuple[str, ...]) -> torch.Tensor:
    """Squared joint speed while the tip is within `radius` of the target [rad²/s²], else 0."""
    near = tracking.position_command_error(env, command, sensor) < radius
    return near * observations.joint_vel(env, joints).square().sum(dim=-1)


def make_two_link_reach_cfg(play: bool = False) -> TaskCfg:
    """Planar two-link arm brings its fingertip to a commanded point."""
    box = {"x_range": (0.15, 0.45), "y_range": (-0.3, 0.3), "z_range": (0.0, 0.0), "marker_mocap": "target"}
    return TaskCfg(
        scene=SceneCfg(build=lambda: mujoco.MjSpec.from_string(XML), default_joint_pos={"elbow": 1.0}),
        episode_length_s=3.0,
        actions={"arm": ActionTermCfg(cls=JointPositionAction, joints=JOINTS, scale=0.5)},
        commands={"target": CommandTermCfg(cls=UniformPositionCommand, resampling_time_range_s=(3.0, 3.0), params=box)},
        observations={"policy": ObsGroupCfg(terms={
            "joint_pos": ObsTermCfg(func=observations.joint_pos_rel, params={"joints": JOINTS}, noise_std=0.01),
            "joint_vel": ObsTermCfg(func=observations.joint_vel, params={"joints": JOINTS}, scale=0.1),
            "tip_pos": ObsTermCfg(func=observations.sensor, params={"name": "tip_pos"}),
            "target": ObsTermCfg(func=observations.generated_command, params={"command": "target"}),
        }, enable_corruption=not play)},  # play, export and deploy see clean observations
        rewards={
            "near": RewardTermCfg(func=tracking.position_command_error_tanh, params={**TIP, "std": 0.1}),
            "still": RewardTermCfg(func=joint_vel_at_target_l2, params={**TIP, "radius": 0.03, "joints": JOINTS}, weight=-0.05),
            "action_rate": RewardTermCfg(func=regularizers.action_rate_l2, weight=-0.01),
        },
        events={"start": EventTermCfg(func=events.reset_joints_uniform, params={"joints": JOINTS, "position_range": (-0.5, 0.5)})},
        success=TermCfg(func=tracking.position_command_reached, params={**TIP, "threshold": 0.03}),
    )


def make_two_link_reach_agent_cfg() -> RunnerCfg:
    return RunnerCfg(experiment_name="two_link_reach", max_iterations=100)
