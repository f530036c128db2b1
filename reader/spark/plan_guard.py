"""A guard against Spark reusing one query's pushed-down scan plan in a later query.

The bug (PySpark 4.1–4.3, JVM side): Spark keeps a Python data source's planned read (the
pickled reader and its partitions, ``PythonDataSourceV2.readInfo``) on the table provider a
loaded DataFrame holds, and replaces it only when a query pushes filters. A later query on the
same DataFrame without a pushable filter (``df.count()`` after ``df.where("offset < 10")``)
runs with the earlier query's plan: the blocks the filter pruned away are missing and the
query still succeeds. A query that reads the same DataFrame twice with different filters
(``a.union(b)``) gets the last pushed plan for both scans. Nothing on the Python side can see
it happen (the reused plan is the earlier query's pickled reader, byte for byte), so the
guard is on the JVM side.

:func:`install_plan_guard` adds an optimizer rule to a session, compiled at run time by the
Janino compiler Spark itself ships (no jar to build or ship). The rule runs after Spark's
scan pushdown. For each scan of the named Python data source it checks the cached plan: one
the rule saw before with another scan (an earlier query, or another scan of the same query)
is dropped, so Spark plans that scan again from its own filters (none: every object). A
pushdown made for this very scan is kept, so pruning still works. A Spark whose provider
keeps no plan (apache/spark has since moved it into ``PythonScanBuilder``, per scan) leaves the
rule nothing to do; if a Spark version moves the other internals the rule reads, queries on
the source fail naming blockgz instead of returning fewer rows.

Example (needs a JVM, so not a doctest)::

    spark = SparkSession.builder.getOrCreate()
    install_plan_guard(spark)  # blockgz.spark_session.register_data_sources does this
"""

from __future__ import annotations

import logging
from typing import Any

from blockgz.errors import SparkPlanError

log = logging.getLogger(__name__)

#: The Java class (compiled by Janino inside the JVM; Janino ignores generics, hence the casts).
RULE_CLASS = "blockgz.spark.FreshPythonScans"
RULE_SOURCE = """
package blockgz.spark;

public class FreshPythonScans extends org.apache.spark.sql.catalyst.rules.Rule {
    /** data source (PythonDataSourceV2) -> {its cached read plan, the scan it was seen with} */
    private final java.util.Map seen =
        java.util.Collections.synchronizedMap(new java.util.WeakHashMap());
    private final String source;

    public FreshPythonScans(String source) { this.source = source; }

    public String source() { return source; }

    public org.apache.spark.sql.catalyst.trees.TreeNode apply(
            org.apache.spark.sql.catalyst.trees.TreeNode plan) {
        scala.collection.Iterator leaves =
            ((org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) plan)
                .collectLeaves().iterator();
        while (leaves.hasNext()) {
            check(leaves.next());
        }
        return plan;
    }

    private static Object field(Object owner, String name) throws Exception {
        java.lang.reflect.Field f = owner.getClass().getDeclaredField(name);
        f.setAccessible(true);
        return f.get(owner);
    }

    private void check(Object node) {
        if (!node.getClass().getName().endsWith(".DataSourceV2ScanRelation")) return;
        try {
            Object scan = node.getClass().getMethod("scan", new Class[0])
                .invoke(node, new Object[0]);
            if (!scan.getClass().getName().endsWith(".python.PythonScan")) return;
            Object ds = field(scan, "ds");
            if (!source.equals(field(ds, "name"))) return;
            Object info;
            try {
                info = field(ds, "readInfo");
            } catch (NoSuchFieldException e) {
                return;  // a Spark that keeps the plan per scan (apache/spark's fix): no cache
            }
            if (info == null) return;
            Object[] last = (Object[]) seen.get(ds);
            if (last != null && last[0] == info && last[1] != scan) {
                // Planned for another scan: plan this one again, from its own filters.
                ds.getClass().getMethod("setReadInfo", new Class[] {info.getClass()})
                    .invoke(ds, new Object[] {null});
                seen.remove(ds);
            } else {
                seen.put(ds, new Object[] {info, scan});
            }
        } catch (Exception e) {
            throw new IllegalStateException(
                "blockgz: cannot check the cached read plan of the Python data source '"
                + source + "' on this Spark version (blockgz.reader.spark.plan_guard); "
                + "refusing to risk a stale plan", e);
        }
    }
}
"""


def install_plan_guard(spark: Any, source: str = "blockgz") -> bool:
    """Add the guard's optimizer rule for the Python data source ``source`` to ``spark``
    (once: a second call finds it). ``False`` when the session has no JVM of its own (Spark
    Connect), where it cannot be added; raises :class:`~blockgz.errors.SparkPlanError` when
    the JVM cannot compile it.

    >>> install_plan_guard(object())  # no JVM here: nothing to add it to
    False
    """
    jvm = getattr(spark, "_jvm", None)
    jsession = getattr(spark, "_jsparkSession", None)
    if jvm is None or jsession is None:
        log.warning(
            "Spark Connect session: blockgz cannot add its guard against Spark reusing a "
            "filtered query's scan plan; load a new DataFrame per filtered query"
        )
        return False
    experimental = jsession.experimental()
    convert = jvm.scala.jdk.javaapi.CollectionConverters
    rules = list(convert.asJava(experimental.extraOptimizations()))
    if any(_is_guard(rule, source) for rule in rules):
        return True
    rules.append(_new_rule(spark, source))
    listed = jvm.java.util.ArrayList()
    for rule in rules:
        listed.add(rule)
    seq = convert.asScala(listed).toSeq()
    getattr(experimental, "extraOptimizations_$eq")(seq)
    return True


def _is_guard(rule: Any, source: str) -> bool:
    try:
        return rule.getClass().getName() == RULE_CLASS and rule.source() == source
    except Exception:  # a rule of another kind
        return False


def _new_rule(spark: Any, source: str) -> Any:
    jvm = spark._jvm
    try:
        compiler = jvm.org.codehaus.janino.SimpleCompiler()
        compiler.setParentClassLoader(jvm.java.lang.Thread.currentThread().getContextClassLoader())
        compiler.cook(RULE_SOURCE)
        rule_class = compiler.getClassLoader().loadClass(RULE_CLASS)
        args = spark.sparkContext._gateway.new_array(jvm.java.lang.Object, 1)
        args[0] = source
        return rule_class.getConstructors()[0].newInstance(args)
    except Exception as exc:
        raise SparkPlanError(
            "cannot compile blockgz's guard against Spark reusing a filtered query's scan plan "
            f"in this JVM (Spark's bundled Janino compiler): {exc}"
        ) from exc
