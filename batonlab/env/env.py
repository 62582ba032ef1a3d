# SPDX-License-Identifier: BSD-3-Clause
"""BatonEnv: a batched, manager-based environment over one physics backend."""

from __future__ import annotations

import math

import torch
from tensordict import TensorDict

from batonlab.env.actions import ActionManager
from batonlab.env.cfg import TaskCfg
from batonlab.env.commands import CommandManager
from batonlab.env.curriculum import CurriculumManager
from batonlab.env.events import EventManager
from batonlab.env.observations import ObservationManager
from batonlab.env.privileges import PrivilegeManager
from batonlab.env.rewards import CostManager, RewardManager
from batonlab.env.scene import Scene
from batonlab.env.terminations import TerminationManager
from batonlab.env.terms import ProgressTerm, build_term
from batonlab.sim import make_backend
from batonlab.terrain import TerrainState


class BatonEnv:
    """N copies of one task, stepped together; every buffer is (num_envs, …) on `device`.

    `step` returns terminated and truncated separately; `batonlab.rl.vecenv.RslRlVecEnv` merges them
    into rsl-rl's `dones` + `extras["time_outs"]`.
    """

    def __init__(self, cfg: TaskCfg):
        cfg.validate()
        self.cfg = cfg
        self.num_envs = cfg.num_envs
        self.scene = Scene(cfg.scene, cfg.sim)
        self.sim = make_backend(
            cfg.sim.backend,
            self.scene.model,
            cfg.num_envs,
            device=cfg.sim.device,
            num_threads=cfg.sim.num_threads,
            max_joint_velocity=cfg.sim.max_joint_velocity,
        )
        self.device = self.sim.device
        self.step_dt = cfg.sim.physics_dt * cfg.sim.decimation
        self.max_episode_length_s = cfg.episode_length_s
        self.max_episode_length = math.ceil(cfg.episode_length_s / self.step_dt)
        self.generator = torch.Generator(device=self.device).manual_seed(cfg.seed)
        self.all_env_ids = torch.arange(self.num_envs, device=self.device)
        self.episode_length_buf = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        self.common_step_counter = 0
        # Reset targets; reset events edit these before they are written to the backend.
        self.default_qpos = self.scene.default_qpos.to(self.device)
        self.reset_qpos = self.default_qpos.repeat(self.num_envs, 1)
        self.reset_qvel = torch.zeros(self.num_envs, self.scene.model.nv, device=self.device)
        # Each env's terrain tile (a single tile at the origin when the scene has no terrain grid).
        self.terrain = TerrainState(self.scene.terrain, self.num_envs, self.device, self.generator)
        self.extras: dict = {"log": {}}

        # Managers; observations come last because their terms read the others' buffers.
        self.action_manager = ActionManager(self, cfg.actions)
        self.command_manager = CommandManager(self, cfg.commands)
        self.event_manager = EventManager(self, cfg.events)
        self.reward_manager = RewardManager(self, cfg.rewards, cfg.only_positive_rewards, cfg.termination_rewards)
        self.cost_manager = CostManager(self, cfg.costs)
        self.termination_manager = TerminationManager(self, cfg.terminations)
        self.privilege_manager = PrivilegeManager(self, cfg.privileges, cfg.privilege_level,
                                                  privileged_actions=self.action_manager.privileged_dim > 0)
        self.curriculum_manager = CurriculumManager(self, cfg.curriculum)
        self.success_term = build_term(cfg.success.func, cfg.success.params, self, "success") if cfg.success else None
        self.progress_term = (build_term(cfg.progress.func, cfg.progress.params, self, "progress", base=ProgressTerm,
                                          functions=False) if cfg.progress else None)
        self.event_manager.apply("startup", self.all_env_ids)
        self._reset_state(self.all_env_ids)
        self.observation_manager = ObservationManager(self, cfg.observations)
        self.obs = self.observation_manager.compute()

    # Properties.

    @property
    def num_actions(self) -> int:
        """Width of the policy output: the summed widths of the action terms."""
        return self.action_manager.action_dim

    # Random numbers from the env's own generator (seeded runs are reproducible).

    def uniform(self, shape, low: float | torch.Tensor, high: float | torch.Tensor) -> torch.Tensor:
        """A tensor of `shape` uniform in [low, high), drawn from the env's generator on its device."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return low + (high - low) * torch.rand(shape, generator=self.generator, device=self.device)

    def normal(self, shape) -> torch.Tensor:
        """A tensor of `shape` of standard normal draws from the env's generator on its device."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return torch.randn(shape, generator=self.generator, device=self.device)

    # Stepping.

    def step(self, action: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        """Advance one control period: actions, the decimated physics, then `end_control_period`.

        Returns:
            obs: observation groups, each (num_envs, dim).
            reward: (num_envs,) weighted sum of reward terms times step_dt.
            terminated: (num_envs,) bool, episode ended by a failure.
            truncated: (num_envs,) bool, episode ended by the time limit.
            extras: "log" (episode statistics of envs that reset), "costs" (num_envs, num_costs),
                "success" (num_envs,) bool, "episode_length" (num_envs,) long [control steps] and
                "command_metrics" ({command: {metric: (num_envs,)}}, the `metrics` of command terms
                that keep them, e.g. `BaseVelocityCommand`), valid where the episode ended this step.
        """
        # 1. Actions become actuator targets; PD runs at the physics rate inside MuJoCo. Privileges
        #    (scaled by λ) write their virtual forces first, privileged actions add theirs.
        self.action_manager.process(action.to(self.device))
        self.privilege_manager.apply()
        self.action_manager.apply(self.sim.ctrl)
        # 2. The decimated physics loop, one backend call.
        self.sim.step(self.cfg.sim.decimation)
        # 3.-7. Counters, terminations, rewards, success, commands, resets, interval events, observations.
        return self.end_control_period()

    def end_control_period(self) -> tuple[TensorDict, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        """Everything `step` does once the physics of a control period has run; returns what `step` returns.

        `step` calls it after its decimated physics call. A caller that runs the physics itself (the
        sim robot of `deploy_ros`, one physics step at a time with targets from ROS) calls it every
        `decimation` physics steps, so that its episodes end, succeed and reset by the task's rules,
        exactly as in training and `play`. Envs whose episode ended are already reset when it returns
        (a caller that starts its next episode otherwise, e.g. from a seed, resets again); their
        outcome is in the returned flags and `extras["success"]` / `extras["episode_length"]`.
        """
        # 3. Counters.
        self.episode_length_buf += 1
        self.common_step_counter += 1
        # 4. Terminations, rewards and costs on the post-step state.
        terminated, truncated = (t.clone() for t in self.termination_manager.compute())
        reward = self.reward_manager.compute(self.step_dt).clone()
        self.extras = {"log": {}, "costs": self.cost_manager.compute().clone()}
        # 5. Success is judged on the last state of the episodes that end here; the length is read before the reset.
        self.extras["success"] = self._success()
        self.extras["episode_length"] = self.episode_length_buf.clone()
        # 6. Command timers advance before resets: a reset env starts its episode with a full timer
        #    (advancing after the reset would resample one step early in every later episode).
        self.command_manager.update(self.step_dt)
        #    Commands' episode metrics (e.g. the speed-tracking error) as they stand at the end of the
        #    episodes that end here: the reset below zeroes them.
        self.extras["command_metrics"] = {name: {k: v.clone() for k, v in term.metrics.items()}
                                          for name, term in self.command_manager.terms.items() if term.metrics}
        # 7. Reset the envs that finished, fire interval events, observe the new state.
        done_ids = (terminated | truncated).nonzero().flatten()
        if done_ids.numel():
            self._reset_idx(done_ids)
        self.event_manager.update(self.step_dt)
        self.obs = self.observation_manager.compute()
        return self.obs, reward, terminated, truncated, self.extras

    def reset(self) -> tuple[TensorDict, dict]:
        """Reset every env; returns the new observations and extras."""
        self.extras = {"log": {}}
        self._reset_idx(self.all_env_ids)
        self.obs = self.observation_manager.compute()
        return self.obs, self.extras

    def get_observations(self) -> TensorDict:
        """The observations of the last step or reset: a TensorDict of (num_envs, dim) tensors by group."""
        return self.obs

    def render(self, env_ids=(0,), size: tuple[int, int] = (240, 320), effects: bool = True, camera: str | None = None,
               geom_groups: tuple[int, ...] | None = None):
        """RGB frames (len(env_ids), H, W, 3) uint8 from `camera` (default: the scene's camera; `effects`
        and `geom_groups`: see `SimBackend.render`)."""
        return self.sim.render(list(env_ids), camera or self.cfg.scene.camera, size, effects=effects,
                               geom_groups=geom_groups)

    def render_progress(self, env_ids, size: tuple[int, int]):
        """Frames as frame-based learned rewards read them: the task's `progress_camera` and
        `progress_geom_groups`, no shadows or reflections. Encoder rollouts, demos and the reward
        term all render through here, so that they see the same picture."""
        return self.render(env_ids, size, effects=False, camera=self.progress_camera,
                           geom_groups=self.cfg.scene.progress_geom_groups)

    @property
    def progress_camera(self) -> str:
        """The camera frame-based learned rewards read (`SceneCfg.progress_camera`, else the scene's camera)."""
        return self.cfg.scene.progress_camera or self.cfg.scene.camera

    def true_progress(self) -> torch.Tensor:
        """(num_envs,) the task's true progress in [0, 1] on the current state (`TaskCfg.progress`)."""
        if self.progress_term is None:
            raise ValueError("this task defines no true progress (TaskCfg.progress); a scripted labeller needs one")
        return self.progress_term(self).float()

    def close(self) -> None:
        """Close the simulation backend."""
        self.sim.close()

    # Private methods.

    def _success(self) -> torch.Tensor:
        if self.success_term is None:
            return torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        return self.success_term(self).bool().clone()  # a term's own state is reset with the episode; extras keep it

    def _reset_idx(self, env_ids: torch.Tensor) -> None:
        log = self.extras["log"]
        if self.success_term is not None and "success" in self.extras:
            log["Episode/success_rate"] = self.extras["success"][env_ids].float().mean()
        log.update(self.curriculum_manager.update(env_ids))
        self._reset_state(env_ids)
        for manager in (self.reward_manager, self.cost_manager, self.termination_manager, self.observation_manager):
            log.update(manager.reset(env_ids))
        if self.success_term is not None:
            self.success_term.reset(env_ids)  # a success judged over the episode (e.g. reached once) starts afresh
        if self.privilege_manager.active:
            log["Privilege/level"] = self.privilege_manager.level
        self.episode_length_buf[env_ids] = 0

    def _reset_state(self, env_ids: torch.Tensor) -> None:
        """Default state, reset events (which may edit `reset_qpos`/`reset_qvel`), then the backend."""
        self.reset_qpos[env_ids] = self.default_qpos
        self.reset_qvel[env_ids] = 0.0
        self.event_manager.apply("reset", env_ids)
        self.privilege_manager.reset(env_ids)  # contact switches follow λ at each env's reset
        self.sim.reset(env_ids, self.reset_qpos[env_ids], self.reset_qvel[env_ids])
        self.action_manager.reset(env_ids)
        self.command_manager.reset(env_ids)
