# SPDX-License-Identifier: BSD-3-Clause
"""A progress reward read from camera frames: how far along one reference demonstration each env has
got, paid only when it moves forward and only when the match is confident.

A task enables it by config, with a trained encoder (`batonlab reward fit-progress`) and a demo:

```python
cfg.rewards["progress"] = RewardTermCfg(
    func=ProgressReward, params={"encoder": "logs/progress_encoder/encoder.pt", "demo": "demo.npz"}, weight=1.0)
```

Frames come from the task's `progress_camera` and `progress_geom_groups` (`SceneCfg`,
`BatonEnv.render_progress`), the view the encoder's rollouts and the demo were rendered from;
`arm_reach` uses a camera carried by the tool that looks at the target and draws only the target.

Scale: the term returns the progress gain divided by the control period, so that the manager's
`weight * dt` cancels the `dt`: with weight w an episode earns at most w in total from this term
(w × the forward progress along the demo), whatever the control rate.
"""

from __future__ import annotations

import torch

from batonlab.learned.progress_encoder import load_encoder
from batonlab.learned.progress_matcher import ProgressMatcher, load_demo
from batonlab.env.terms import ManagerTerm


class ProgressReward(ManagerTerm):
    """`max(0, p_t - best p so far) / step_dt` where the match confidence is at least the threshold.

    Rendering is budgeted: every `render_every` control steps the next `num_rendered` envs (round
    robin) are rendered in one call and embedded in one forward pass; their progress estimates are
    updated and only they can be paid on that step. The other envs keep their last estimate and
    get 0. Each env is thus rendered every `render_every * num_envs / num_rendered` steps. Keep that
    well under the time the task takes: on `arm_reach_sparse` (256 envs, reach done in about 10
    steps) rendering each env every 64 steps made the reward a late, sparse payment that held
    learning back (play success 0.08 0 0.20 on 3 seeds, sparse-only 0.17 0 0.85); every 4 steps
    (`render_every=1, num_rendered=64`) it helped (0.93 and 0.91 on seeds 0 and 2).

    Args:
        encoder: Path of the encoder file.
        demo: Path of the demonstration (`.mp4`, `.npz` with `frames`, or a rosbag2 folder).
        render_every: Control steps between two render calls.
        num_rendered: Envs rendered per call.
        size: Render size [pixels] (None: the encoder's input size; other sizes are resized to it).
        confidence_threshold: Minimum match margin (`progress_matcher`) for an estimate to pay.
        restart_on: Name of a command (e.g. `ee_target`) whose resampling starts a new attempt: the
            envs whose command changed start again from no progress, as at a reset. Without it a task
            that redraws its goal mid-episode (arm_reach: every 2 s) could never be paid for reaching
            the second goal, since the best progress of the first already stands.
    """

    def __init__(self, env, encoder: str = "", demo: str = "", render_every: int = 4, num_rendered: int = 16,
                 size: int | None = None, confidence_threshold: float = 0.1, restart_on: str | None = None):
        self.off = not encoder and not demo
        """Both paths empty: the term is carried switched off and returns zeros (a task switches it on
        with `env.rewards.<name>.params.encoder=... demo=...`)."""
        if self.off:
            return
        if not encoder or not demo:
            raise ValueError(f"ProgressReward needs both an encoder and a demo (got encoder={encoder!r}, demo={demo!r})")
        if render_every < 1 or num_rendered < 1:
            raise ValueError(f"ProgressReward: render_every={render_every} and num_rendered={num_rendered} must be >= 1")
        model = load_encoder(encoder, device=env.device)
        self.size = size or model.cfg.image_size
        self.matcher = ProgressMatcher(model, load_demo(demo, size=model.cfg.image_size, scene=env.cfg))
        self.step_dt = env.step_dt
        self.render_every = render_every
        self.num_rendered = min(num_rendered, env.num_envs)
        self.confidence_threshold = confidence_threshold
        self.progress = torch.zeros(env.num_envs, device=env.device)
        """(num_envs,) latest progress estimate in [0, 1] (from each env's last render)."""
        self.confidence = torch.zeros(env.num_envs, device=env.device)
        """(num_envs,) match margin of that estimate."""
        self.best = torch.zeros(env.num_envs, device=env.device)
        """(num_envs,) highest confident progress of the episode so far."""
        self.restart_on = restart_on
        self._goal = env.command_manager.command(restart_on).clone() if restart_on else None
        self.last_confidence_rate = 0.0
        """Fraction of the envs rendered last time whose match was confident (for logs)."""
        self._steps = 0
        self._cursor = 0

    def __call__(self, env) -> torch.Tensor:
        reward = torch.zeros(env.num_envs, device=env.device)
        if self.off:
            return reward
        if self._goal is not None:
            goal = env.command_manager.command(self.restart_on)
            restarted = (goal != self._goal).any(dim=1)
            self.best[restarted] = 0.0
            self._goal.copy_(goal)
        step, self._steps = self._steps, self._steps + 1
        if step % self.render_every:
            return reward
        ids = (self._cursor + torch.arange(self.num_rendered, device=env.device)) % env.num_envs
        self._cursor = (self._cursor + self.num_rendered) % env.num_envs
        frames = env.render_progress(ids.tolist(), (self.size, self.size))
        progress, confidence = self.matcher.match(frames)
        confident = confidence >= self.confidence_threshold
        gain = torch.where(confident, (progress - self.best[ids]).clamp(min=0.0), torch.zeros_like(progress))
        self.best[ids] = torch.where(confident, torch.maximum(self.best[ids], progress), self.best[ids])
        self.progress[ids], self.confidence[ids] = progress, confidence
        self.last_confidence_rate = confident.float().mean().item()
        reward[ids] = gain / self.step_dt
        return reward

    def reset(self, env_ids: torch.Tensor) -> None:
        """Zero the best, latest progress and confidence of the envs that reset (nothing when the term is off)."""
        if self.off:
            return
        self.best[env_ids] = 0.0
        self.progress[env_ids] = 0.0
        self.confidence[env_ids] = 0.0
