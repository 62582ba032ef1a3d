# SPDX-License-Identifier: BSD-3-Clause
"""Terrain: a flat plane, or a grid of difficulty levels × terrain types in one MuJoCo heightfield.

The grid follows legged_gym and Isaac Lab: tile (level, type) is a `tile_size` square whose
difficulty grows with the level; rows along world x are levels, columns along world y are types.
Every tile has a flat spawn platform at its centre, and each environment is given a tile (its
*origin*) that reset events spawn the robot on and curricula move between.

Two objects:
- `Terrain` (static, built once with the scene): the height grid, the tile origins, and the MjSpec
  heightfield or plane. `Scene` builds it from `SceneCfg.terrain`.
- `TerrainState` (per env, on `env.terrain`): each env's level, type and origin; curricula call
  `update_levels` / `set_cells`, reset events read `env_origins`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import mujoco
import numpy as np
import torch

# Config.


@dataclass
class TerrainCfg:
    """What the ground is made of. The default is a flat plane; `kind="grid"` builds the level × type grid."""

    kind: Literal["plane", "grid"] = "plane"
    """`plane`: one flat floor at z = 0; `grid`: a heightfield of levels × types."""
    types: tuple[str, ...] = ("flat", "rough", "slope", "steps")
    """Terrain type of each grid column (keys of `TERRAIN_TYPES`)."""
    num_levels: int = 6
    """Difficulty levels (grid rows); level 0 is the easiest, the last one uses the `*_range` maxima."""
    tile_size: float = 5.0
    """Side of one square tile [m]."""
    border: float = 2.5
    """Flat margin around the grid [m]."""
    horizontal_scale: float = 0.1
    """Heightfield cell size [m]."""
    platform_size: float = 1.2
    """Side of the flat square at each tile centre where robots spawn [m]."""
    rough_amplitude_range: tuple[float, float] = (0.01, 0.05)
    """Half-range of the uniform height noise on `rough` tiles, at level 0 and the last level [m]."""
    rough_cell_size: float = 0.2
    """Spacing of the noise samples on `rough` tiles (interpolated in between) [m]."""
    slope_range: tuple[float, float] = (0.0, 0.3)
    """Grade (rise over run) of `slope` pyramids, at level 0 and the last level [-]."""
    step_height_range: tuple[float, float] = (0.01, 0.07)
    """Step height of `steps` (rings that rise outwards from the centre), level 0 and the last level [m]."""
    step_width: float = 0.6
    """Tread of one step [m]."""
    friction: tuple[float, float, float] = (1.0, 0.005, 0.0001)
    """MuJoCo geom friction of the ground (sliding, torsional, rolling)."""
    max_init_level: int = 0
    """Envs start on levels drawn uniformly in [0, max_init_level]."""
    seed: int = 0
    """Seed of the terrain generator (the terrain is the same in every run with the same config)."""

    def validate(self) -> None:
        """Raise `ValueError` for an unknown kind or type, no level or type, or `max_init_level` out of range."""
        if self.kind not in ("plane", "grid"):
            raise ValueError(f"terrain.kind must be 'plane' or 'grid', got {self.kind!r}")
        unknown = [t for t in self.types if t not in TERRAIN_TYPES]
        if unknown:
            raise ValueError(f"unknown terrain types {unknown}; valid types: {sorted(TERRAIN_TYPES)}")
        if self.num_levels < 1 or not self.types:
            raise ValueError("terrain needs at least one level and one type")
        if not 0 <= self.max_init_level < self.num_levels:
            raise ValueError(f"terrain.max_init_level must be in [0, {self.num_levels - 1}], got {self.max_init_level}")


# Tile generators: (x, y, difficulty, cfg, rng) -> heights [m]; x, y are offsets from the tile centre [m].


def _flat(x: np.ndarray, y: np.ndarray, difficulty: float, cfg: TerrainCfg, rng: np.random.Generator) -> np.ndarray:
    return np.zeros_like(x)


def _rough(x: np.ndarray, y: np.ndarray, difficulty: float, cfg: TerrainCfg, rng: np.random.Generator) -> np.ndarray:
    amplitude = _lerp(cfg.rough_amplitude_range, difficulty)
    # Coarse noise, bilinearly interpolated onto the fine grid (bumps, not single-cell spikes).
    n = int(round(cfg.tile_size / cfg.rough_cell_size)) + 1
    coarse = rng.uniform(-amplitude, amplitude, size=(n, n))
    u = np.clip((x + cfg.tile_size / 2) / cfg.rough_cell_size, 0, n - 1.001)
    v = np.clip((y + cfg.tile_size / 2) / cfg.rough_cell_size, 0, n - 1.001)
    i, j = v.astype(int), u.astype(int)
    fv, fu = v - i, u - j
    return (
        coarse[i, j] * (1 - fv) * (1 - fu)
        + coarse[i, j + 1] * (1 - fv) * fu
        + coarse[i + 1, j] * fv * (1 - fu)
        + coarse[i + 1, j + 1] * fv * fu
    )


def _slope(x: np.ndarray, y: np.ndarray, difficulty: float, cfg: TerrainCfg, rng: np.random.Generator) -> np.ndarray:
    """A pyramid: flat top at the centre, slopes down to height 0 at the tile edge."""
    grade = _lerp(cfg.slope_range, difficulty)
    r = np.maximum(np.abs(x), np.abs(y))
    return grade * (cfg.tile_size / 2 - np.clip(r, cfg.platform_size / 2, cfg.tile_size / 2))


def _steps(x: np.ndarray, y: np.ndarray, difficulty: float, cfg: TerrainCfg, rng: np.random.Generator) -> np.ndarray:
    """Square rings of low steps rising outwards from a flat pit to height 0 at the tile edge (the robot climbs out)."""
    height = _lerp(cfg.step_height_range, difficulty)
    r = np.maximum(np.abs(x), np.abs(y))
    ring = np.ceil(np.clip(r - cfg.platform_size / 2, 0.0, None) / cfg.step_width)
    last_ring = np.ceil((cfg.tile_size - cfg.platform_size) / 2 / cfg.step_width)
    return height * (np.minimum(ring, last_ring) - last_ring)


TERRAIN_TYPES: dict[str, Callable[..., np.ndarray]] = {"flat": _flat, "rough": _rough, "slope": _slope, "steps": _steps}
"""Tile generators by name; add an entry to offer a new type to `TerrainCfg.types`."""


# The static terrain.


class Terrain:
    """The generated ground: heights (rows along y, columns along x, as MuJoCo's hfield) and tile origins.

    Attributes:
        heights: (nrow, ncol) float32 ground height of each heightfield vertex [m] (grid only).
        origins: (num_levels, num_types, 3) spawn point at the centre of each tile, world frame [m].
    """

    def __init__(self, cfg: TerrainCfg):
        cfg.validate()
        self.cfg = cfg
        self.num_levels = cfg.num_levels if cfg.kind == "grid" else 1
        self.num_types = len(cfg.types) if cfg.kind == "grid" else 1
        self.heights: np.ndarray | None = None
        self.origins = np.zeros((self.num_levels, self.num_types, 3))
        if cfg.kind == "grid":
            self._generate()

    @property
    def size_xy(self) -> tuple[float, float]:
        """Extent of the heightfield along x and y [m]."""
        c = self.cfg
        return self.num_levels * c.tile_size + 2 * c.border, self.num_types * c.tile_size + 2 * c.border

    def add_to_spec(self, spec: mujoco.MjSpec) -> None:
        """Add the ground (geom `terrain`) with a grid texture to the scene's world body."""
        c = self.cfg
        spec.add_texture(
            name="terrain_grid", type=mujoco.mjtTexture.mjTEXTURE_2D, builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER,
            rgb1=[0.42, 0.45, 0.48], rgb2=[0.34, 0.37, 0.40], width=64, height=64,
        )
        spec.add_material(name="terrain", textures=["", "terrain_grid"], texrepeat=[1, 1], texuniform=True, reflectance=0.05)
        if self.heights is None:
            spec.worldbody.add_geom(
                name="terrain", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05], material="terrain",
                friction=list(c.friction), contype=1, conaffinity=1,
            )
            return
        low, high = float(self.heights.min()), float(self.heights.max())
        elevation = max(high - low, 1e-3)
        nrow, ncol = self.heights.shape
        sx, sy = self.size_xy
        spec.add_hfield(
            name="terrain", size=[sx / 2, sy / 2, elevation, 0.5], nrow=nrow, ncol=ncol,
            userdata=((self.heights - low) / elevation).astype(np.float32).flatten().tolist(),
        )
        spec.worldbody.add_geom(
            name="terrain", type=mujoco.mjtGeom.mjGEOM_HFIELD, hfieldname="terrain", pos=[0, 0, low],
            material="terrain", friction=list(c.friction), contype=1, conaffinity=1,
        )

    def height_at(self, xy: np.ndarray) -> np.ndarray:
        """Ground height under world points (..., 2), bilinear in the heightfield [m]."""
        if self.heights is None:
            return np.zeros(xy.shape[:-1])
        sx, sy = self.size_xy
        h = self.cfg.horizontal_scale
        nrow, ncol = self.heights.shape
        u = np.clip((xy[..., 0] + sx / 2) / h, 0, ncol - 1.001)
        v = np.clip((xy[..., 1] + sy / 2) / h, 0, nrow - 1.001)
        i, j = v.astype(int), u.astype(int)
        fv, fu = v - i, u - j
        g = self.heights
        return (
            g[i, j] * (1 - fv) * (1 - fu)
            + g[i, j + 1] * (1 - fv) * fu
            + g[i + 1, j] * fv * (1 - fu)
            + g[i + 1, j + 1] * fv * fu
        )

    # Private methods.

    def _generate(self) -> None:
        c = self.cfg
        rng = np.random.default_rng(c.seed)
        sx, sy = self.size_xy
        ncol, nrow = int(round(sx / c.horizontal_scale)) + 1, int(round(sy / c.horizontal_scale)) + 1
        xs = np.linspace(-sx / 2, sx / 2, ncol)
        ys = np.linspace(-sy / 2, sy / 2, nrow)
        heights = np.zeros((nrow, ncol))
        for level in range(self.num_levels):
            difficulty = level / max(1, self.num_levels - 1)
            cx = -sx / 2 + c.border + (level + 0.5) * c.tile_size
            cols = np.abs(xs - cx) <= c.tile_size / 2
            for t, name in enumerate(c.types):
                cy = -sy / 2 + c.border + (t + 0.5) * c.tile_size
                rows = np.abs(ys - cy) <= c.tile_size / 2
                x, y = np.meshgrid(xs[cols] - cx, ys[rows] - cy)
                tile = TERRAIN_TYPES[name](x, y, difficulty, c, rng)
                heights[np.ix_(rows, cols)] = tile
                self.origins[level, t, :2] = (cx, cy)
        self.heights = heights.astype(np.float32)
        # Spawn height: the highest ground on the platform, so that no wheel starts inside a bump.
        half = c.platform_size / 2
        for level in range(self.num_levels):
            for t in range(self.num_types):
                cx, cy = self.origins[level, t, :2]
                rows, cols = np.abs(ys - cy) <= half, np.abs(xs - cx) <= half
                self.origins[level, t, 2] = heights[np.ix_(rows, cols)].max()


def build_terrain(cfg: TerrainCfg, spec: mujoco.MjSpec) -> Terrain:
    """Generate the terrain of `cfg` and add it to `spec`."""
    terrain = Terrain(cfg)
    terrain.add_to_spec(spec)
    return terrain


# Per-env state.


class TerrainState:
    """Each env's tile: level and type (long tensors) and the tile's origin (num_envs, 3) [m].

    Without a terrain (the scene brings its own floor) there is one tile at the world origin, so
    reset events and curricula work unchanged.
    """

    def __init__(self, terrain: Terrain | None, num_envs: int, device: torch.device, generator: torch.Generator):
        self.terrain = terrain
        self.device = device
        self.generator = generator
        origins = terrain.origins if terrain is not None else np.zeros((1, 1, 3))
        self.tile_origins = torch.as_tensor(origins, dtype=torch.float32, device=device)
        self.num_levels, self.num_types = self.tile_origins.shape[:2]
        max_init = terrain.cfg.max_init_level if terrain is not None else 0
        self.levels = torch.randint(0, max_init + 1, (num_envs,), generator=generator, device=device)
        # Types are spread evenly over the envs, as in legged_gym.
        self.types = torch.arange(num_envs, device=device) % self.num_types
        self.env_origins = torch.zeros(num_envs, 3, device=device)
        self._refresh(torch.arange(num_envs, device=device))

    @property
    def tile_size(self) -> float:
        """Side of one tile [m] (inf without a terrain)."""
        return self.terrain.cfg.tile_size if self.terrain is not None else float("inf")

    def update_levels(self, env_ids: torch.Tensor, move_up: torch.Tensor, move_down: torch.Tensor) -> None:
        """Promote / demote envs by one level; envs that pass the last level restart on a random level."""
        levels = self.levels[env_ids] + move_up.long() - move_down.long()
        beyond = levels >= self.num_levels
        random_levels = torch.randint(0, self.num_levels, levels.shape, generator=self.generator, device=self.device)
        levels = torch.where(beyond, random_levels, levels.clamp(min=0))
        self.levels[env_ids] = levels
        self._refresh(env_ids)

    def set_cells(
        self, env_ids: torch.Tensor, levels: torch.Tensor | None = None, types: torch.Tensor | None = None
    ) -> None:
        """Move envs to given levels and/or types (e.g. chosen by a bandit)."""
        if levels is not None:
            self.levels[env_ids] = levels.long().clamp(0, self.num_levels - 1)
        if types is not None:
            self.types[env_ids] = types.long().clamp(0, self.num_types - 1)
        self._refresh(env_ids)

    def state_dict(self) -> dict:
        """Copies of each env's level and type (num_envs,), for a checkpoint."""
        return {"levels": self.levels.clone(), "types": self.types.clone()}

    def load_state_dict(self, state: dict) -> None:
        """Restore each env's tile; with a different number of envs (play, resume with more envs), the
        envs draw their tiles from the saved ones, which keeps the distribution over levels and types."""
        levels, types = state["levels"].to(self.device).long(), state["types"].to(self.device).long()
        n = self.levels.shape[0]
        if levels.shape[0] != n:
            pick = torch.randint(0, levels.shape[0], (n,), generator=self.generator, device=self.device)
            levels, types = levels[pick], types[pick]
        self.levels[:] = levels.clamp(0, self.num_levels - 1)
        self.types[:] = types.clamp(0, self.num_types - 1)
        self._refresh(torch.arange(n, device=self.device))

    def _refresh(self, env_ids: torch.Tensor) -> None:
        self.env_origins[env_ids] = self.tile_origins[self.levels[env_ids], self.types[env_ids]]


def _lerp(value_range: tuple[float, float], t: float) -> float:
    return value_range[0] + (value_range[1] - value_range[0]) * t
