"""Trajectories: the search's edges as chunked Parquet parts with commit manifests (docs/trajectories.md), the
labelling rule, resume, shard merge and summaries. Import from the module that holds a name: the labels, schema,
writer and reader are engines the search uses, the merge and the summary are stages above them, so this package
re-exports nothing (importing `burnqed.trajectory.labels` would otherwise load the merge stage too).

    label_edges(edges, proof_leaves, proved)                        # labels.py: once per finished theorem
    with TrajectoryWriter(uri, run_id=..., iteration=..., store=store) as w:     # writer.py: append, checkpoint
        w.add(result, edges); ...; w.finish()
    finished_theorems(uri, store=store) / read_edges(uri, columns, store=store)  # reader.py
    summarize(uri, store=store)                                     # summary.py
    merge_trajectories(shards, out, store=store)                    # merge.py
"""
