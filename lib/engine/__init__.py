"""The engine: the stage runner, run bookkeeping (accounting, report, layout, lock), the Spark session and the command line. It calls the stage families below it; none of them imports it."""
