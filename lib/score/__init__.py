"""Model scores: fastText classifiers annotate each document with a score in `signals.<name>`.

`model` checks model files on the driver (their structure, before Spark starts) and loads
them once per Python worker; `stage` runs them per Arrow batch on the executors; `train`
trains a classifier from two sets of documents (`python -m shardforge.score.train`).
"""
