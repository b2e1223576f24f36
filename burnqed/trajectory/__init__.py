"""Trajectories: the search's edges as chunked Parquet parts with commit manifests (docs/trajectories.md), the
labelling rule, writing with resume, and reading. Import from the module that holds a name: this package re-exports
nothing. The shard merge and the summaries are stages (`burnqed.stages.merge`, `burnqed.stages.summary`).

    label_edges(edges, proof_leaves, proved)                        # labels.py: once per finished theorem
    with TrajectoryWriter(uri, run_id=..., iteration=..., store=store) as w:     # writer.py: append, checkpoint
        w.add(result, edges); ...; w.finish()
    finished_theorems(uri, store=store) / read_edges(uri, columns, store=store)  # reader.py
    read_theorem(uri, name, store=store)                            # reader.py; drawn by theorem_tree.py
"""
