# SPDX-License-Identifier: BSD-3-Clause
"""Learned rewards: dense learning signal from a sparse success signal without hand-written shaping.

- `progress_encoder`, `progress_matcher`: a time-contrastive image encoder and progress measured against
  one reference demonstration (`batonlab reward fit-progress`; term `batonlab.rewards.progress.ProgressReward`);
- `chat_client`, `stand_in_server`: an OpenAI-compatible chat-completions client (images and text) and a local
  server speaking the same API that answers from scripted oracles (tests, users without a model server);
- `preference`: preference labels on rendered states (from a VLM or a privileged-state labeller) fitted into a
  potential Φ with a Bradley–Terry loss (term `batonlab.rewards.learned.PotentialShaping`);
- `sandbox`: runs LLM-written Python in a child process with a restricted namespace and limits;
- `llm_progress`, `search`: LLM-written progress functions with count bonuses, and the Eureka-style reward
  search on Ray (`batonlab reward search`).
"""
