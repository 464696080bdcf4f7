"""The wire contract: what crosses between frontends, the coordinator workflow, the pass
activity and the Spark agents, as plain typed data (rank 1 of DESIGN §7; no Temporal here).

* :mod:`.messages` the requests and events frontends send, and the ``Response`` envelope;
* :mod:`.answers` the shapes of each request's answer;
* :mod:`.agent_contract` the agent's activities, their assignments and reports;
* :mod:`.pass_io` the pass activity's input and output;
* :mod:`.coordinator_config` the coordinator's configuration, ids and reported status;
* :mod:`.refusals` the names of every deliberate refusal (``ApplicationError`` types).

The order in which these travel, and what is guaranteed, is ``docs/protocol.md``.
"""
