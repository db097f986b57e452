/* Staged columns as Arrow buffers, in C (see arrow_native.py).
 *
 * buffers(values, kind) turns one staged column, a list of the decoder's values, into the buffers
 * of an Arrow array of one type, when every value is the plain Python value of that type (or
 * None): exact ints in range, exact floats, exact str, exact datetimes (naive or UTC), exact dates.
 * Anything else (a bool, a subclass, a value out of range, another time zone, text that is not
 * UTF-8) returns None, and pyarrow builds the column from the values as before: it raises what is
 * wrong, or converts what only it accepts. So the array is pyarrow's by construction.
 *
 * Returns (null_count, validity or None, data, offsets or None): the validity bitmap (LSB first,
 * None without NULLs), the values (little-endian int32/int64/float64, int32 days, int64
 * microseconds since the epoch) or the UTF-8 bytes, and for str the int32 offsets.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <datetime.h>
#include <stdint.h>
#include <string.h>

enum { K_INT32 = 0, K_INT64 = 1, K_FLOAT64 = 2, K_STRING = 3, K_TIMESTAMP_US = 4, K_DATE32 = 5 };

/* days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil) */
static inline int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* one value into slot i of data; 0, or -1 to decline the column */
static inline int put(int kind, PyObject *v, char *data, Py_ssize_t i) {
    switch (kind) {
    case K_INT32: case K_INT64: {
        if (!PyLong_CheckExact(v)) return -1;
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) return -1;
        if (kind == K_INT32) {
            if (x < INT32_MIN || x > INT32_MAX) return -1;
            int32_t y = (int32_t)x;
            memcpy(data + 4 * i, &y, 4);
        } else {
            int64_t y = (int64_t)x;
            memcpy(data + 8 * i, &y, 8);
        }
        return 0;
    }
    case K_FLOAT64: {
        if (!PyFloat_CheckExact(v)) return -1;
        double x = PyFloat_AS_DOUBLE(v);
        memcpy(data + 8 * i, &x, 8);
        return 0;
    }
    case K_TIMESTAMP_US: {
        if (!PyDateTime_CheckExact(v)) return -1;
        PyObject *tz = PyDateTime_DATE_GET_TZINFO(v);
        if (tz != Py_None && tz != PyDateTime_TimeZone_UTC) return -1;
        int64_t days = days_from_civil(PyDateTime_GET_YEAR(v), PyDateTime_GET_MONTH(v), PyDateTime_GET_DAY(v));
        int64_t secs = days * 86400 + PyDateTime_DATE_GET_HOUR(v) * 3600 + PyDateTime_DATE_GET_MINUTE(v) * 60 +
                       PyDateTime_DATE_GET_SECOND(v);
        int64_t us = secs * 1000000 + PyDateTime_DATE_GET_MICROSECOND(v);
        memcpy(data + 8 * i, &us, 8);
        return 0;
    }
    case K_DATE32: {
        if (!PyDate_CheckExact(v)) return -1;
        int32_t days = (int32_t)days_from_civil(PyDateTime_GET_YEAR(v), PyDateTime_GET_MONTH(v), PyDateTime_GET_DAY(v));
        memcpy(data + 4 * i, &days, 4);
        return 0;
    }
    }
    return -1;
}

static PyObject *declined(PyObject *a, PyObject *b, PyObject *c) {
    Py_XDECREF(a);
    Py_XDECREF(b);
    Py_XDECREF(c);
    PyErr_Clear();
    Py_RETURN_NONE;
}

static PyObject *buffers(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "buffers(values: list, kind: int)");
        return NULL;
    }
    PyObject *values = args[0];
    long kind = PyLong_AsLong(args[1]);
    if (kind == -1 && PyErr_Occurred()) return NULL;
    if (kind < K_INT32 || kind > K_DATE32) {
        PyErr_SetString(PyExc_ValueError, "buffers: unknown kind");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(values);
    PyObject *validity = PyBytes_FromStringAndSize(NULL, (n + 7) / 8), *data = NULL, *offsets = NULL;
    if (validity == NULL) return NULL;
    uint8_t *bits = (uint8_t *)PyBytes_AS_STRING(validity);
    memset(bits, 0, (n + 7) / 8);
    Py_ssize_t nulls = 0;
    if (kind == K_STRING) {
        /* first the lengths (and the check of every value), then the bytes */
        offsets = PyBytes_FromStringAndSize(NULL, (n + 1) * 4);
        if (offsets == NULL) return declined(validity, NULL, NULL);
        int32_t *off = (int32_t *)PyBytes_AS_STRING(offsets);
        int64_t total = 0;
        off[0] = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *v = PyList_GET_ITEM(values, i);
            if (v == Py_None) {
                nulls++;
            } else {
                Py_ssize_t len;
                if (!PyUnicode_CheckExact(v) || PyUnicode_AsUTF8AndSize(v, &len) == NULL)
                    return declined(validity, offsets, NULL);
                total += len;
                if (total > INT32_MAX) return declined(validity, offsets, NULL);
                bits[i >> 3] |= (uint8_t)(1 << (i & 7));
            }
            off[i + 1] = (int32_t)total;
        }
        data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
        if (data == NULL) return declined(validity, offsets, NULL);
        char *out = PyBytes_AS_STRING(data);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *v = PyList_GET_ITEM(values, i);
            if (v == Py_None) continue;
            Py_ssize_t len;
            const char *s = PyUnicode_AsUTF8AndSize(v, &len); /* cached by the first pass */
            memcpy(out + off[i], s, (size_t)len);
        }
    } else {
        Py_ssize_t width = (kind == K_INT32 || kind == K_DATE32) ? 4 : 8;
        data = PyBytes_FromStringAndSize(NULL, n * width);
        if (data == NULL) return declined(validity, NULL, NULL);
        char *out = PyBytes_AS_STRING(data);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *v = PyList_GET_ITEM(values, i);
            if (v == Py_None) {
                nulls++;
                memset(out + width * i, 0, (size_t)width);
                continue;
            }
            if (put((int)kind, v, out, i) < 0) return declined(validity, data, NULL);
            bits[i >> 3] |= (uint8_t)(1 << (i & 7));
        }
    }
    if (nulls == 0) {
        Py_DECREF(validity);
        validity = Py_NewRef(Py_None);
    }
    PyObject *result = Py_BuildValue("nOOO", nulls, validity, data, offsets ? offsets : Py_None);
    Py_DECREF(validity);
    Py_DECREF(data);
    Py_XDECREF(offsets);
    return result;
}

static PyMethodDef methods[] = {
    {"buffers", (PyCFunction)(void (*)(void))buffers, METH_FASTCALL,
     "buffers(values, kind) -> (null_count, validity, data, offsets) of an Arrow array, or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_columns", "Staged columns as Arrow buffers.", -1, methods,
};

PyMODINIT_FUNC PyInit__columns(void) {
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL) return NULL;
    return PyModule_Create(&moduledef);
}
