# SPDX-License-Identifier: BSD-3-Clause
"""Curriculum terms (installed as `batonlab.curricula`).

A curriculum term is called as `term(env, env_ids)` with the envs that just reset, returns a value
(or a small dict) to log, and, if it keeps state, has `state_dict()` / `load_state_dict()` so that
checkpoints carry it.
"""
