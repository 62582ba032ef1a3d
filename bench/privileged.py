# SPDX-License-Identifier: BSD-3-Clause
"""Teachers, their students and plain training of the grasping tasks, all judged at λ = 0.

    python bench/privileged.py [--tasks arm_lift arm_push_grasp arm_door] [--seeds 0 1 2] [--num-envs 512]
                               [--variants teacher student finetune plain] [--teacher-iterations N]
                               [--distill-iterations 150] [--finetune-iterations 200] [--eval-episodes 64]
                               [--sim-to-sim 16] [--out bench_results/privileged]

Per task and seed, in this order (the later variants start from the earlier ones' runs):
- `teacher`: the task's defaults: privileges on (λ = 1 at the start), the privilege schedule taking λ
  to 0 by its deadline, actor and critic reading the privileged group; `--teacher-iterations`
  (default: the task's own budget);
- `student`: DAgger distillation of the teacher (`agent.algorithm.class_name=Distillation`, β = 0.5
  falling to 0 over the first half) onto the deployable `student` group (the `policy` terms with 3
  frames of history), at λ = 0; `keep_best=true` keeps the checkpoint of its best play evaluation (every
  25 iterations, 128 episodes of the training seed: DAgger's success swings), which is tested too (`best`
  in the table: the test episodes are other seeds than the selection's);
- `finetune`: PPO fine-tuning of that best student at λ = 0 (`finetune=`), critic from the teacher, the actor
  held for the first 20 iterations while the critic learns the student's returns; `keep_best` as for `student`;
- `plain`: the task from scratch with λ = 0 throughout (no help, no schedule), the teacher's iterations;
- `force_actions`: the teacher with its attraction rule replaced by policy-driven virtual forces
  (`VirtualForceAction` on the object), the same schedule and iterations;
- `expert_student`: DAgger distillation from the task's scripted expert (`teacher=expert`) onto the `student`
  group at λ = 0, β as for `student`, `--distill-iterations`;
- `expert_student_tool`: the same with the arm driven by tool steps (`actions/tool_step.py: ToolStepAction`:
  the expert's labels are its Cartesian steps, not joint targets); the robot runs its twin from the manifest;
- `deployable`: the teacher's training (privileges, schedule, iterations) with an actor that reads only
  the deployable `policy` group (an asymmetric actor–critic: the critic still reads the privileged
  group); its policy deploys as it is, with no distillation.
Every policy is tested at λ = 0 on the same play episodes. The table gives the success rate, the
final λ of the training, for object tasks how high the object got in hand and the fraction of steps
the tool point spent parked at the object (its centre within the object's largest half size + 5 cm)
without the object lifted 2 cm, and the training time. A video of the first test episodes of each
variant and `results.json` (rewritten after every variant) are written to `--out`. With `--sim-to-sim N`,
every deployable variant (`student`, `finetune`, `deployable`) also runs over ROS 2 (`bench/sim_to_sim.py`:
policy_node and sim_robot_node, lockstep) on N seeds, next to `play` on the same seeds (of `student` and `finetune`:
their `model_best.pt`, exported and played).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from batonlab.cli import train as cli_train
from batonlab.cli.common import build_invocation
from batonlab.cli.policy_loading import load_trained
from batonlab.env.cfg import ActionTermCfg
from batonlab.env.env import BatonEnv
from batonlab.observations.objects import body_pos
from batonlab.privileges.virtual_forces import VirtualForceAction
from batonlab.rl.evaluate import evaluate
from batonlab.sim.render import write_mp4
from batonlab.tasks import make_task_cfg
from batonlab.tasks.grasping import tool_step_arm_action

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sim_to_sim import compare_on_seeds  # noqa: E402

VARIANTS = ("teacher", "student", "finetune", "plain", "force_actions", "deployable", "expert_student",
            "expert_student_tool")
DEPLOYABLE = ("student", "finetune", "deployable", "expert_student")
"""Variants whose policy reads only what a robot gives it: these run over ROS 2 with `--sim-to-sim`."""
SIM_TO_SIM_SEED = 1000
"""First seed of the sim-to-sim episodes (`bench/sim_to_sim.py`'s default)."""
SELECTION_INTERVAL, SELECTION_EPISODES = 25, 128
"""The play evaluations that pick `student`'s and `finetune`'s `model_best.pt`: every 25 iterations, 128 episodes."""
SELECTION = ["keep_best=true", f"eval_interval={SELECTION_INTERVAL}", f"eval_episodes={SELECTION_EPISODES}"]
PARK_MARGIN = 0.05
"""The tool point is parked at the object within the object's largest half size plus this [m]."""


@dataclass
class VariantResult:
    task: str
    name: str
    seed: int
    env_steps: int
    train_time_s: float
    final_level: float
    train_success: float
    """Success rate of the last training iteration (at the training's λ)."""
    success: float
    """Success rate at λ = 0 on the test episodes."""
    run_dir: str
    """The training run (`bench/sim_to_sim.py RUN_DIR` takes it)."""
    max_lift_in_hand: float = float("nan")
    """Mean over test episodes of the highest lift of the object while in hand [m] (object tasks)."""
    parked_fraction: float = float("nan")
    """Fraction of test steps with the tool parked at the object and the object not lifted 2 cm (object tasks)."""
    levels: list[float] = field(default_factory=list)
    """λ after every training iteration."""
    play_seeds_success: float = float("nan")
    """`--sim-to-sim`: success of `play` on the sim-to-sim seeds."""
    ros_success: float = float("nan")
    """`--sim-to-sim`: success over ROS 2 on those seeds."""
    best_success: float = float("nan")
    """`student`, `finetune`: success at λ = 0 on the test episodes of its `model_best.pt`."""
    best_iteration: int = -1
    """`student`, `finetune`: the iteration of its `model_best.pt`."""


def apply_variant(cfg, variant: str) -> None:
    """Edit a task config into `variant` (the others train the task as it is)."""
    if variant == "plain":
        cfg.privilege_level = 0.0
        cfg.curriculum.pop("privilege", None)
    elif variant == "force_actions":
        cfg.privileges.pop("attraction", None)
        cfg.actions["virtual_force"] = ActionTermCfg(cls=VirtualForceAction, joints=(), params={"body": "object", "max_force": 6.0})
    elif variant == "expert_student_tool":
        cfg.actions["arm"] = tool_step_arm_action()


def variant_overrides(variant: str, runs: dict[str, Path], distill: int, finetune: int) -> list[str]:
    """`batonlab train` overrides of a variant that starts from an earlier variant's run."""
    if variant == "student":
        return ["agent.algorithm.class_name=Distillation", f"teacher={runs['teacher']}", f"max_iterations={distill}",
                "agent.obs_groups.student=[student]",
                "agent.algorithm.distillation.teacher_action_prob=0.5",
                f"agent.algorithm.distillation.teacher_action_iterations={max(1, distill // 2)}", *SELECTION]
    if variant.startswith("expert_student"):
        return ["agent.algorithm.class_name=Distillation", "teacher=expert", f"max_iterations={distill}",
                "agent.obs_groups.student=[student]", "agent.algorithm.distillation.teacher_action_prob=0.5",
                f"agent.algorithm.distillation.teacher_action_iterations={max(1, distill // 2)}"]
    if variant == "finetune":
        return [f"finetune={runs['student']}", f"max_iterations={finetune}", "agent.critic_warmup_iterations=20",
                *SELECTION]
    if variant == "deployable":
        return ["agent.obs_groups.actor=[policy]"]
    return []


def train(task: str, variant: str, seed: int, num_envs: int, iterations: int | None, log_root: Path,
          extra: list[str]):
    """Train one variant with `batonlab train`'s entry (a run folder under `log_root`)."""
    distilled = ("student", "finetune", "expert_student", "expert_student_tool")
    budget = [f"max_iterations={iterations}"] if iterations is not None and variant not in distilled else []
    inv = build_invocation([f"task={task}", f"seed={seed}", f"env.num_envs={num_envs}", *budget, "eval_episodes=0",
                            *extra, f"log_root={log_root / variant}", "progress=false"])
    apply_variant(inv.task, variant)
    levels: list[float] = []

    def record(runner, stats: dict[str, float]) -> None:
        levels.append(runner.env.env.privilege_manager.level)

    result = cli_train.train(inv, on_iteration=record)
    return result, levels


def best_policy(task: str, trained):
    """The inference policy of a `keep_best` run's `model_best.pt`, as `batonlab play checkpoint=` loads it."""
    inv = build_invocation([f"task={task}", f"run_dir={trained.run_dir}", f"checkpoint={trained.best.path}"], play=True)
    inv.task.num_envs = 1
    env, runner, _, _ = load_trained(inv)
    env.close()
    return runner.inference_policy()


@torch.inference_mode()
def test(task: str, variant: str, policy, seed: int, episodes: int, video: Path | None) -> dict:
    """One episode per env at λ = 0 (the play task); privileged actions, if any, act at λ = 0, i.e. not at all."""
    cfg = make_task_cfg(task)
    cfg.num_envs, cfg.seed = episodes, 10_000 + seed
    apply_variant(cfg, variant)
    play = make_task_cfg(task, play=True)
    cfg.privilege_level, cfg.curriculum, cfg.observations = 0.0, {}, play.observations
    env = BatonEnv(cfg)
    event = env.event_manager.terms.get("object")
    scores: dict[str, float] = {}
    measure = None
    if event is not None:
        reach = float(event.nominal_half.max()) + PARK_MARGIN
        in_hand = cfg.success.params["radius"]
        best_lift = torch.zeros(episodes)
        parked, steps = torch.zeros(()), torch.zeros(())
        counting = torch.ones(episodes, dtype=torch.bool)

        def measure(env, obs, actions, done) -> None:
            nonlocal parked, steps
            if done is None:
                return
            distance = (env.sim.sensor("ee_pos_w") - body_pos(env, "object")).norm(dim=1)
            lift = body_pos(env, "object")[:, 2] - event.half_height
            held = distance < in_hand
            best_lift[counting & held] = torch.maximum(best_lift, lift)[counting & held]
            parked += (counting & (distance < reach) & (lift < 0.02)).sum()
            steps += counting.sum()
            counting.logical_and_(~done)

    video_ids = (0, 1, 2, 3) if video is not None else ()
    result = evaluate(env, policy, video_env_ids=video_ids, video_size=(240, 320), progress=False, step_callback=measure)
    if video is not None and result.frames:
        write_mp4(str(video), result.frames, fps=1.0 / env.step_dt)
    env.close()
    if event is not None:
        scores = {"max_lift_in_hand": float(best_lift.clamp_min(0).mean()),
                  "parked_fraction": float(parked / steps.clamp_min(1))}
    return {"success": result.success_rate, **scores}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["arm_lift", "arm_push_grasp", "arm_door"])
    parser.add_argument("--num-envs", type=int, default=512)
    parser.add_argument("--teacher-iterations", type=int, default=None, help="default: each task's own budget")
    parser.add_argument("--distill-iterations", type=int, default=150)
    parser.add_argument("--finetune-iterations", type=int, default=200)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--variants", nargs="+", default=["teacher", "student", "finetune", "plain"], choices=VARIANTS)
    parser.add_argument("--eval-episodes", type=int, default=64)
    parser.add_argument("--out", type=Path, default=Path("bench_results/privileged"))
    parser.add_argument("--no-video", action="store_true")
    parser.add_argument("--sim-to-sim", type=int, default=0, metavar="N",
                        help="episodes over ROS 2 per deployable variant (0: none)")
    args = parser.parse_args()
    needs = {"student": "teacher", "finetune": "student"}
    for variant, earlier in needs.items():
        if variant in args.variants and earlier not in args.variants:
            parser.error(f"--variants {variant} starts from {earlier}: list {earlier} too")
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MUJOCO_GL", "egl")

    results: list[VariantResult] = []
    for task in args.tasks:
        for seed in args.seeds:
            runs: dict[str, Path] = {}
            for variant in [v for v in VARIANTS if v in args.variants]:
                extra = variant_overrides(variant, runs, args.distill_iterations, args.finetune_iterations)
                print(f"[privileged] {task} / {variant}, seed {seed}: {args.num_envs} envs", flush=True)
                trained, levels = train(task, variant, seed, args.num_envs, args.teacher_iterations, args.out / "logs",
                                        extra)
                chosen = Path(trained.best.path) if trained.best is not None else None  # a keep_best run's model_best.pt
                runs[variant] = chosen or trained.run_dir  # where a later variant starts (finetune: the best student)
                video = None if args.no_video else args.out / f"{task}_{variant}_seed{seed}.mp4"
                scores = test(task, variant, trained.policy, seed, args.eval_episodes, video)
                if trained.best is not None:
                    best = test(task, variant, best_policy(task, trained), seed, args.eval_episodes, None)
                    scores.update(best_success=best["success"], best_iteration=trained.best.iteration)
                if args.sim_to_sim and variant in DEPLOYABLE:
                    play, _, ros, _ = compare_on_seeds(Path(trained.run_dir), task, SIM_TO_SIM_SEED, args.sim_to_sim,
                                                    domain_id=61, log=lambda line: print(f"[privileged] {line}", flush=True),
                                                    checkpoint=chosen)
                    scores.update(play_seeds_success=float(play.successes.mean()), ros_success=float(ros.successes.mean()))
                results.append(VariantResult(task, variant, seed, trained.env_steps, trained.wall_s,
                                             levels[-1] if levels else float("nan"),
                                             trained.stats.get("Episode/success_rate", float("nan")),
                                             run_dir=str(trained.run_dir), levels=levels, **scores))
                print(f"[privileged] {task} / {variant}: success at λ=0 {scores['success']:.2f}, final λ "
                      f"{results[-1].final_level:.2f}, {trained.wall_s / 60:.1f} min"
                      + (f"; its best checkpoint (it. {scores['best_iteration']}) {scores['best_success']:.2f}"
                         if "best_success" in scores else "")
                      + (f"; play {scores['play_seeds_success']:.2f} vs ROS 2 {scores['ros_success']:.2f} on "
                         f"{args.sim_to_sim} seeds" if "ros_success" in scores else ""), flush=True)
                (args.out / "results.json").write_text(json.dumps([asdict(r) for r in results], indent=1))

    print(f"\nTested at λ = 0 on {args.eval_episodes} episodes; {args.num_envs} envs\n")
    print(f"{'task':15s} {'variant':14s} {'seed':>4s} {'M steps':>7s} {'final λ':>8s} {'train succ':>10s} "
          f"{'succ λ=0':>9s} {'best (it.)':>11s} {'lift':>6s} {'parked':>7s} {'min':>5s} {'play/ROS 2':>11s}")
    for r in results:
        print(f"{r.task:15s} {r.name:14s} {r.seed:4d} {r.env_steps / 1e6:7.2f} {r.final_level:8.2f} "
              f"{r.train_success:10.2f} {r.success:9.2f} {r.best_success:5.2f} ({r.best_iteration:3d}) "
              f"{r.max_lift_in_hand:6.3f} {r.parked_fraction:7.2f} "
              f"{r.train_time_s / 60:5.1f} {r.play_seeds_success:5.2f}/{r.ros_success:4.2f}")
    print(f"\n[privileged] results: {args.out / 'results.json'}")


if __name__ == "__main__":
    main()
