# Produced tests/data/funnel/probe_events.zstd (Spark 4.2 event log) with:
#   spark-submit --master local[2] --conf spark.eventLog.enabled=true --conf spark.eventLog.dir=file:///tmp/ev/events \
#     --conf spark.sql.shuffle.partitions=4 --conf spark.sql.adaptive.coalescePartitions.enabled=false probe.py
# Queries: 0 groupBy-count write (fine), 1 count (fine), 2 collect of 20000 rows, 3 coalesce(1) write,
# 4 window without PARTITION BY, 5 repartition(1) write, 6 take(3) (fine), 7 a join Spark broadcasts by
# itself (a 5 MB side, under the 10 MB autoBroadcastJoinThreshold: bounded), 8 a join with a broadcast hint
# on a 15 MB side (over the threshold: a funnel).
from pyspark.sql import SparkSession, functions as F, Window
spark = SparkSession.builder.getOrCreate()
df = spark.range(0, 20000, numPartitions=4).withColumn("t", F.concat(F.lit("doc-"), F.col("id").cast("string"), F.lit("x"*200)))
g = df.groupBy((F.col("id") % 7).alias("k")).count()
g.write.mode("overwrite").parquet("/tmp/ev/out_g")
print(df.count())
rows = df.collect()
df.coalesce(1).write.mode("overwrite").parquet("/tmp/ev/out_c")
df.withColumn("rn", F.row_number().over(Window.orderBy("id"))).write.mode("overwrite").parquet("/tmp/ev/out_w")
df.repartition(1).write.mode("overwrite").parquet("/tmp/ev/out_r")
print(df.take(3)[0].id)


def side(n):  # n rows of about 256 incompressible bytes
    return spark.range(0, n, numPartitions=4).select(
        "id", F.concat(*[F.sha2(F.concat(F.col("id").cast("string"), F.lit(str(i))), 256) for i in range(4)]).alias("pad"))


big = spark.range(0, 200000, numPartitions=4).select((F.col("id") % 20000).alias("id"))
big.join(side(20000), "id").write.mode("overwrite").parquet("/tmp/ev/out_b")
big.join(F.broadcast(side(60000)), "id").write.mode("overwrite").parquet("/tmp/ev/out_h")
spark.stop()
