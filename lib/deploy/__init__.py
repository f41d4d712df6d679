"""Deployment helpers: the spark-submit package, the JVM jars, and a standalone cluster on 127.0.0.1."""
