/* C fast path of folding row changes and of staging a folded piece (see fold_native.py).
 *
 * Two functions, each the twin of one case of a Python loop in collapse.py / statements.py, and
 * each leaving every other case to that loop:
 *
 * fold_run   folds row changes into a piece's state while they are the common case: a piece
 *            without metadata or shard column, whose full images of its schema are held as bare
 *            tuples. It stops, changing nothing for it, at the first change it does not take
 *            (another schema, a partial image, a missing key column, not a RowChange); the
 *            Python fold takes that one and raises what is wrong with it.
 * columns    turns a chunk of a piece's (key, held) items into one list per column plus the
 *            action column, when every held value is a bare tuple of the lake columns or a delete;
 *            otherwise it returns None and staged_rows() does the chunk.
 *
 * And two per-batch passes of the merger over its entries (lake/routes.py, lake/pending.py):
 *
 * sources    groups a batch's entries by source table, in order (the routing's pass);
 * in_order   whether entries' order keys strictly increase (a batch's target entries almost always
 *            do: the sort by order key is then skipped).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "../_slots.h"

#define PLAN_NAME "airflow_provider_binlog.lake._fold.ChangePlan"
#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* where a RowChange keeps op, before, after, table_schema, schema, table and order_key */
#define PLAN_SLOTS 7
typedef struct {
    PyTypeObject *cls;
    Py_ssize_t off[PLAN_SLOTS];
} ChangePlan;

enum { OP, BEFORE, AFTER, SCHEMA, SOURCE_SCHEMA, SOURCE_TABLE, ORDER_KEY };

static void plan_free(PyObject *capsule) {
    ChangePlan *p = (ChangePlan *)PyCapsule_GetPointer(capsule, PLAN_NAME);
    if (p != NULL) {
        Py_XDECREF(p->cls);
        PyMem_Free(p);
    }
}

/* change_plan(cls, (op, before, after, table_schema, schema, table, order_key)): the slot offsets
 * of those seven names */
static PyObject *change_plan(PyObject *mod, PyObject *args) {
    PyObject *cls, *names;
    if (!PyArg_ParseTuple(args, "O!O!:change_plan", &PyType_Type, &cls, &PyTuple_Type, &names)) return NULL;
    PyTypeObject *type = (PyTypeObject *)cls;
    if (PyTuple_GET_SIZE(names) != PLAN_SLOTS || type->tp_dictoffset != 0 || type->tp_itemsize != 0) {
        PyErr_SetString(PyExc_ValueError, "change_plan: seven slot names of a class without __dict__");
        return NULL;
    }
    ChangePlan *p = PyMem_Malloc(sizeof(ChangePlan));
    if (p == NULL) return PyErr_NoMemory();
    for (Py_ssize_t j = 0; j < PLAN_SLOTS; j++) {
        if ((p->off[j] = slot_offset(type, PyTuple_GET_ITEM(names, j))) < 0) {
            PyMem_Free(p);
            return NULL;
        }
    }
    Py_INCREF(cls);
    p->cls = type;
    PyObject *capsule = PyCapsule_New(p, PLAN_NAME, plan_free);
    if (capsule == NULL) {
        Py_DECREF(cls);
        PyMem_Free(p);
    }
    return capsule;
}

/* The key of a row image (dict): the value of keys[0], or the tuple of the values of keys.
 * NULL without an exception when a key column is missing; NULL with one on an error. */
static PyObject *key_of(PyObject *image, PyObject *keys) {
    Py_ssize_t n = PyTuple_GET_SIZE(keys);
    if (n == 1) {
        PyObject *v = PyDict_GetItemWithError(image, PyTuple_GET_ITEM(keys, 0));
        return v == NULL ? NULL : Py_NewRef(v);
    }
    PyObject *key = PyTuple_New(n);
    if (key == NULL) return NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *v = PyDict_GetItemWithError(image, PyTuple_GET_ITEM(keys, k));
        if (v == NULL) {
            Py_DECREF(key);
            return NULL;
        }
        PyTuple_SET_ITEM(key, k, Py_NewRef(v));
    }
    return key;
}

/* The values of a dict, in its order, as a tuple of n (the caller checked its size). */
static PyObject *values_of(PyObject *image, Py_ssize_t n) {
    PyObject *out = PyTuple_New(n), *k, *v;
    if (out == NULL) return NULL;
    Py_ssize_t pos = 0, i = 0;
    while (i < n && PyDict_Next(image, &pos, &k, &v)) PyTuple_SET_ITEM(out, i++, Py_NewRef(v));
    return out;
}

/* fold_run(plan, state, changes, start, keys, schema, width, (insert, update, delete), existing)
 *   -> (stop, inserts, updates, deletes, existing)
 * changes[start:stop] folded into state (dict); changes[stop] is the first one not taken. */
static PyObject *fold_run(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 9 || !PyDict_CheckExact(args[1]) || !PyList_Check(args[2]) || !PyTuple_Check(args[4]) ||
        PyTuple_GET_SIZE(args[4]) < 1 || !PyTuple_Check(args[7]) || PyTuple_GET_SIZE(args[7]) != 3) {
        PyErr_SetString(PyExc_TypeError,
                        "fold_run(plan, state, changes, start, keys, schema, width, (insert, update, delete), "
                        "existing)");
        return NULL;
    }
    ChangePlan *p = (ChangePlan *)PyCapsule_GetPointer(args[0], PLAN_NAME);
    if (p == NULL) return NULL;
    PyObject *state = args[1], *changes = args[2], *keys = args[4], *schema = args[5];
    Py_ssize_t start = PyLong_AsSsize_t(args[3]), width = PyLong_AsSsize_t(args[6]);
    int existing = PyObject_IsTrue(args[8]);
    if (PyErr_Occurred() || existing < 0) return NULL;
    PyObject *insert = PyTuple_GET_ITEM(args[7], 0), *update = PyTuple_GET_ITEM(args[7], 1),
             *delete = PyTuple_GET_ITEM(args[7], 2);
    Py_ssize_t inserts = 0, updates = 0, deletes = 0, i, n = PyList_GET_SIZE(changes);
    if (start < 0) start = 0;
    for (i = start; i < PyList_GET_SIZE(changes) && i < n; i++) {
        PyObject *c = PyList_GET_ITEM(changes, i);
        if (!Py_IS_TYPE(c, p->cls)) break;
        PyObject *op = SLOT(c, p->off[OP]), *before = SLOT(c, p->off[BEFORE]);
        PyObject *old = NULL, *new = NULL, *values = NULL;
        if (op == insert || op == update) {
            PyObject *after = SLOT(c, p->off[AFTER]);
            if (after == NULL || !PyDict_CheckExact(after) || PyDict_GET_SIZE(after) != width ||
                SLOT(c, p->off[SCHEMA]) != schema)
                break;
            if (op == update && (before == NULL || !PyDict_CheckExact(before))) break;
            if ((new = key_of(after, keys)) == NULL) goto missing;
            if (op == update && (old = key_of(before, keys)) == NULL) {
                Py_DECREF(new);
                goto missing;
            }
            if ((values = values_of(after, width)) == NULL) goto fail;
        } else if (op == delete) {
            if (before == NULL || !PyDict_CheckExact(before)) break;
            if ((old = key_of(before, keys)) == NULL) goto missing;
        } else {
            break;
        }
        /* taken: nothing above changed the state */
        if (old != NULL) {
            if (!existing) {
                int had = PyDict_Contains(state, old);
                if (had < 0) goto fail;
                existing = !had;
            }
            int moved = new == NULL ? 1 : PyObject_RichCompareBool(old, new, Py_NE);
            if (moved < 0 || (moved && PyDict_SetItem(state, old, Py_None) < 0)) goto fail;
        }
        if (new != NULL && PyDict_SetItem(state, new, values) < 0) goto fail;
        if (op == insert)
            inserts++;
        else if (op == update)
            updates++;
        else
            deletes++;
        Py_XDECREF(old);
        Py_XDECREF(new);
        Py_XDECREF(values);
        continue;
    fail:
        Py_XDECREF(old);
        Py_XDECREF(new);
        Py_XDECREF(values);
        return NULL;
    missing:
        if (PyErr_Occurred()) return NULL;
        break; /* the Python fold raises MissingKeyError for it */
    }
    return Py_BuildValue("nnnnO", i, inserts, updates, deletes, existing ? Py_True : Py_False);
}

/* columns(items, width, key_positions, upsert, delete) -> [column, ..., actions] or None
 * items: (key, held) tuples; held a tuple of width values (an upsert) or None (a delete: its key
 * goes to key_positions, a tuple of column indexes; several are filled from a tuple key). */
static PyObject *columns(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyList_Check(args[0]) || !PyTuple_Check(args[2]) || PyTuple_GET_SIZE(args[2]) < 1) {
        PyErr_SetString(PyExc_TypeError, "columns(items, width, key_positions, upsert, delete)");
        return NULL;
    }
    PyObject *items = args[0], *key_positions = args[2], *upsert = args[3], *delete = args[4];
    Py_ssize_t width = PyLong_AsSsize_t(args[1]), nkeys = PyTuple_GET_SIZE(key_positions);
    if (width < 0 && PyErr_Occurred()) return NULL;
    Py_ssize_t *pos = PyMem_Malloc(nkeys * sizeof(Py_ssize_t));
    if (pos == NULL) return PyErr_NoMemory();
    for (Py_ssize_t k = 0; k < nkeys; k++) {
        pos[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(key_positions, k));
        if (pos[k] < 0 || pos[k] >= width) {
            PyMem_Free(pos);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "columns: a key position out of range");
            return NULL;
        }
    }
    Py_ssize_t rows = PyList_GET_SIZE(items);
    PyObject *out = PyList_New(width + 1);
    if (out == NULL) goto fail;
    for (Py_ssize_t j = 0; j <= width; j++) {
        PyObject *col = PyList_New(rows);
        if (col == NULL) goto fail;
        PyList_SET_ITEM(out, j, col);
    }
    for (Py_ssize_t i = 0; i < rows; i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2) goto other;
        PyObject *key = PyTuple_GET_ITEM(item, 0), *held = PyTuple_GET_ITEM(item, 1);
        if (held == Py_None) {
            if (nkeys > 1 && (!PyTuple_CheckExact(key) || PyTuple_GET_SIZE(key) != nkeys)) goto other;
            for (Py_ssize_t j = 0; j < width; j++) PyList_SET_ITEM(PyList_GET_ITEM(out, j), i, Py_NewRef(Py_None));
            for (Py_ssize_t k = 0; k < nkeys; k++) {
                PyObject *col = PyList_GET_ITEM(out, pos[k]);
                PyObject *v = nkeys == 1 ? key : PyTuple_GET_ITEM(key, k);
                Py_SETREF(((PyListObject *)col)->ob_item[i], Py_NewRef(v));
            }
            PyList_SET_ITEM(PyList_GET_ITEM(out, width), i, Py_NewRef(delete));
        } else if (PyTuple_CheckExact(held) && PyTuple_GET_SIZE(held) == width) {
            for (Py_ssize_t j = 0; j < width; j++)
                PyList_SET_ITEM(PyList_GET_ITEM(out, j), i, Py_NewRef(PyTuple_GET_ITEM(held, j)));
            PyList_SET_ITEM(PyList_GET_ITEM(out, width), i, Py_NewRef(upsert));
        } else {
            goto other;
        }
        continue;
    other: /* not this case: the Python loop takes the chunk (the lists' unset items are NULL) */
        PyMem_Free(pos);
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    PyMem_Free(pos);
    return out;
fail:
    PyMem_Free(pos);
    Py_XDECREF(out);
    return NULL;
}

/* sources(plan, entries, ddl_cls) -> [(schema, table, entries of that table, row changes among them)]
 * Row changes (plan's class) and ddl_cls entries whose table is not None, grouped by (schema, table)
 * in the order each table first comes, each group in the batch's order; other entries left out. */
static PyObject *sources(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !(PyList_Check(args[1]) || PyTuple_Check(args[1])) || !PyType_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "sources(plan, entries: list or tuple, ddl_cls)");
        return NULL;
    }
    ChangePlan *p = (ChangePlan *)PyCapsule_GetPointer(args[0], PLAN_NAME);
    if (p == NULL) return NULL;
    PyObject *entries = args[1], *ddl = args[2];
    PyObject *index = PyDict_New(), *out = PyList_New(0); /* (schema, table) -> position in out */
    PyObject *last_schema = NULL, *last_table = NULL, *group = NULL; /* borrowed */
    Py_ssize_t *counts = NULL, ngroups = 0, cap = 0, at = -1;
    if (index == NULL || out == NULL) goto fail;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(entries); i++) {
        PyObject *e = PySequence_Fast_GET_ITEM(entries, i), *schema, *table;
        int row = Py_IS_TYPE(e, p->cls);
        if (row) {
            schema = SLOT(e, p->off[SOURCE_SCHEMA]);
            table = SLOT(e, p->off[SOURCE_TABLE]);
            if (schema == NULL || table == NULL) {
                PyErr_SetString(PyExc_AttributeError, "sources: a row change without schema or table");
                goto fail;
            }
        } else if (Py_IS_TYPE(e, (PyTypeObject *)ddl)) {
            table = PyObject_GetAttrString(e, "table");
            if (table == NULL) goto fail;
            Py_DECREF(table); /* kept alive by e */
            if (table == Py_None) continue;
            schema = PyObject_GetAttrString(e, "schema");
            if (schema == NULL) goto fail;
            Py_DECREF(schema);
        } else {
            continue;
        }
        if (schema != last_schema || table != last_table) { /* another table than the entry before */
            PyObject *key = PyTuple_Pack(2, schema, table);
            if (key == NULL) goto fail;
            PyObject *found = PyDict_GetItemWithError(index, key);
            if (found != NULL) {
                at = PyLong_AsSsize_t(found);
            } else if (PyErr_Occurred()) {
                Py_DECREF(key);
                goto fail;
            } else {
                if (ngroups == cap) {
                    cap = cap ? 2 * cap : 8;
                    Py_ssize_t *grown = PyMem_Realloc(counts, cap * sizeof(Py_ssize_t));
                    if (grown == NULL) {
                        Py_DECREF(key);
                        PyErr_NoMemory();
                        goto fail;
                    }
                    counts = grown;
                }
                PyObject *list = PyList_New(0), *pos = PyLong_FromSsize_t(ngroups);
                PyObject *item = list == NULL ? NULL : PyTuple_Pack(3, schema, table, list);
                int rc = item == NULL || pos == NULL ? -1 : PyDict_SetItem(index, key, pos);
                if (rc == 0) rc = PyList_Append(out, item);
                Py_XDECREF(list);
                Py_XDECREF(pos);
                Py_XDECREF(item);
                if (rc < 0) {
                    Py_DECREF(key);
                    goto fail;
                }
                counts[ngroups] = 0;
                at = ngroups++;
            }
            Py_DECREF(key);
            last_schema = schema;
            last_table = table;
            group = PyTuple_GET_ITEM(PyList_GET_ITEM(out, at), 2);
        }
        if (PyList_Append(group, e) < 0) goto fail;
        counts[at] += row;
    }
    /* (schema, table, list) -> (schema, table, list, row changes) */
    for (Py_ssize_t g = 0; g < ngroups; g++) {
        PyObject *item = PyList_GET_ITEM(out, g);
        PyObject *full = Py_BuildValue("OOOn", PyTuple_GET_ITEM(item, 0), PyTuple_GET_ITEM(item, 1),
                                       PyTuple_GET_ITEM(item, 2), counts[g]);
        if (full == NULL) goto fail;
        PyList_SetItem(out, g, full); /* steals full, drops item */
    }
    PyMem_Free(counts);
    Py_DECREF(index);
    return out;
fail:
    PyMem_Free(counts);
    Py_XDECREF(index);
    Py_XDECREF(out);
    return NULL;
}

/* in_order(plan, entries) -> whether each entry's order_key is less than the next one's */
static PyObject *in_order(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !(PyList_Check(args[1]) || PyTuple_Check(args[1]))) {
        PyErr_SetString(PyExc_TypeError, "in_order(plan, entries: list or tuple)");
        return NULL;
    }
    ChangePlan *p = (ChangePlan *)PyCapsule_GetPointer(args[0], PLAN_NAME);
    if (p == NULL) return NULL;
    PyObject *entries = args[1], *prev = NULL;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(entries); i++) {
        PyObject *e = PySequence_Fast_GET_ITEM(entries, i), *key;
        if (Py_IS_TYPE(e, p->cls) && SLOT(e, p->off[ORDER_KEY]) != NULL) {
            key = Py_NewRef(SLOT(e, p->off[ORDER_KEY]));
        } else if ((key = PyObject_GetAttrString(e, "order_key")) == NULL) {
            Py_XDECREF(prev);
            return NULL;
        }
        if (prev != NULL) {
            int lt = PyObject_RichCompareBool(prev, key, Py_LT);
            Py_DECREF(prev);
            if (lt <= 0) {
                Py_DECREF(key);
                if (lt < 0) return NULL;
                Py_RETURN_FALSE;
            }
        }
        prev = key;
    }
    Py_XDECREF(prev);
    Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {
    {"change_plan", change_plan, METH_VARARGS,
     "change_plan(cls, (op, before, after, table_schema, schema, table, order_key)) -> where cls keeps them"},
    {"fold_run", (PyCFunction)(void (*)(void))fold_run, METH_FASTCALL,
     "fold_run(plan, state, changes, start, keys, schema, width, ops, existing) -> (stop, inserts, updates, "
     "deletes, existing)"},
    {"columns", (PyCFunction)(void (*)(void))columns, METH_FASTCALL,
     "columns(items, width, key_positions, upsert, delete) -> one list per column and the actions, or None"},
    {"sources", (PyCFunction)(void (*)(void))sources, METH_FASTCALL,
     "sources(plan, entries, ddl_cls) -> [(schema, table, entries, row changes)] in the order tables first come"},
    {"in_order", (PyCFunction)(void (*)(void))in_order, METH_FASTCALL,
     "in_order(plan, entries) -> whether the entries' order keys strictly increase"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_fold", "C fast path of the fold and of staging a folded piece.", -1, methods,
};

PyMODINIT_FUNC PyInit__fold(void) { return PyModule_Create(&moduledef); }
