/* Row images to Python values in C: the fast path of airflow_provider_binlog.binlog.values.
 *
 * A Plan is built once per (TABLE_MAP, columns-present bitmap) from per-column specs that
 * values.py derives from the same ColumnDefs its generated Python decoder uses. decode_rows()
 * and decode_pairs() decode every row image of a rows-event body into the dicts the Python decoder
 * would build, value for value.
 *
 * Errors are never produced here. Whenever the bytes are anything but clean (a read past `end`,
 * invalid text, an ENUM index or SET bit beyond the labels, a DECIMAL digit group out of range,
 * a Python reader that raises, the images not ending exactly at `end`), the functions return
 * None with no exception set, and the caller decodes the whole event again with the Python
 * decoder, which then raises its own DecodeError (or, for the few inputs only it accepts, returns
 * the values). So errors are the Python path's by construction, and every read is bounds-checked
 * against `end` (never beyond the bytes object).
 *
 * Spec per column: (kind, p1, p2, p3, obj); see the K_* and TXT_* constants below and
 * values._native_spec. A plan may keep some columns only (the keep flags: a merge by key needs the
 * key columns of a before image): the others are read past by their lengths, no value is built,
 * and their bytes are not checked (the caller's Python twin decodes them all and drops them).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <datetime.h>
#include <stdint.h>
#include <string.h>

enum {
    K_NULL = 0,       /* no bytes; None */
    K_INT = 1,        /* p1 = width 1, 2, 3, 4, 8; little-endian signed */
    K_UINT = 2,       /* p1 = width 1, 2, 3, 4, 8; little-endian unsigned */
    K_FLOAT = 3,      /* float32 little-endian */
    K_DOUBLE = 4,     /* float64 little-endian */
    K_YEAR = 5,       /* one byte, +1900 unless 0 */
    K_BIT = 6,        /* p1 = bytes 1..8, big-endian unsigned */
    K_STR = 7,        /* p1 = length width 1..4, p2 = TXT_*, p3 = pad length, obj = codec/mapping */
    K_DATE = 8,       /* 3 bytes; a date Python's date() refuses declines the event (Python makes
                         its InvalidDate, with the event's position) */
    K_DATETIME2 = 9,  /* p1 = fraction bytes 0..3 */
    K_TIMESTAMP2 = 10, /* p1 = fraction bytes 0..3 */
    K_TIME2 = 11,     /* p1 = fraction bytes 0..3 */
    K_DECIMAL = 12,   /* p1 = precision, p2 = scale */
    K_ENUM = 13,      /* p1 = width 1..8, obj = labels tuple or None */
    K_SET = 14,       /* p1 = width 1..8, obj = labels tuple or None */
    K_READER = 15,    /* obj = the Python reader f(body, pos) -> (value, pos) */
};

enum {
    TXT_BYTES = 0,   /* bytes */
    TXT_UTF8 = 1,    /* bytes.decode('utf-8') */
    TXT_CHARMAP = 2, /* codecs.charmap_decode(raw, 'strict', obj) (MySQL latin1) */
    TXT_CODEC = 3,   /* bytes.decode(obj) */
    TXT_PAD = 4,     /* bytes.ljust(p3, b'\0') (BINARY(n)) */
};

#if PY_VERSION_HEX < 0x030B0000
#define PyFloat_Unpack4 _PyFloat_Unpack4
#define PyFloat_Unpack8 _PyFloat_Unpack8
#endif

static const int DIG2BYTES[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};
static const uint32_t POW10[10] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000,
                                   1000000000};
static const int FRAC_MULT[4] = {0, 10000, 100, 1};

static PyObject *DecimalType = NULL; /* decimal.Decimal, set by setup() */
static PyObject *EmptyStr = NULL;
static PyObject *Comma = NULL;

typedef struct {
    int kind;
    Py_ssize_t p1, p2, p3;
    PyObject *obj;     /* labels, reader, codec name or charmap (owned) */
    const char *codec; /* UTF-8 of obj for TXT_CODEC (kept alive by obj) */
    Py_ssize_t nlabels;
    int skip;          /* read past, not kept in the image (Plan's keep flags) */
    /* DECIMAL layout */
    int i_rem, i_full, f_full, f_rem, size;
} Col;

typedef struct {
    PyObject_HEAD
    Py_ssize_t ncols;
    Py_ssize_t nullbytes;
    Py_ssize_t kept; /* columns not skipped */
    PyObject *names; /* tuple of str */
    Col *cols;
} Plan;

static void Plan_dealloc(Plan *self) {
    if (self->cols) {
        for (Py_ssize_t i = 0; i < self->ncols; i++) Py_XDECREF(self->cols[i].obj);
        PyMem_Free(self->cols);
    }
    Py_XDECREF(self->names);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int plan_col(Col *c, PyObject *spec) {
    long long kind, p1, p2, p3;
    PyObject *obj;
    if (!PyTuple_Check(spec) || !PyArg_ParseTuple(spec, "LLLLO", &kind, &p1, &p2, &p3, &obj)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "spec must be a tuple");
        return -1;
    }
    c->kind = (int)kind;
    c->p1 = (Py_ssize_t)p1;
    c->p2 = (Py_ssize_t)p2;
    c->p3 = (Py_ssize_t)p3;
    switch (kind) {
    case K_NULL: case K_FLOAT: case K_DOUBLE: case K_YEAR: case K_DATE:
        break;
    case K_INT: case K_UINT:
        if (!(p1 == 1 || p1 == 2 || p1 == 3 || p1 == 4 || p1 == 8)) goto bad;
        break;
    case K_BIT:
        if (p1 < 1 || p1 > 8) goto bad;
        break;
    case K_STR:
        if (p1 < 1 || p1 > 4 || p2 < TXT_BYTES || p2 > TXT_PAD || p3 < 0) goto bad;
        if (p2 == TXT_CHARMAP && !PyUnicode_Check(obj)) goto bad;
        if (p2 == TXT_CODEC) {
            if (!PyUnicode_Check(obj)) goto bad;
            c->codec = PyUnicode_AsUTF8(obj);
            if (c->codec == NULL) return -1;
        }
        break;
    case K_DATETIME2: case K_TIMESTAMP2: case K_TIME2:
        if (p1 < 0 || p1 > 3) goto bad;
        break;
    case K_DECIMAL: {
        if (p1 < 1 || p1 > 65 || p2 < 0 || p2 > 30 || p2 > p1) goto bad;
        int intg = (int)(p1 - p2);
        c->i_full = intg / 9;
        c->i_rem = intg % 9;
        c->f_full = (int)p2 / 9;
        c->f_rem = (int)p2 % 9;
        c->size = DIG2BYTES[c->i_rem] + c->i_full * 4 + c->f_full * 4 + DIG2BYTES[c->f_rem];
        break;
    }
    case K_ENUM: case K_SET:
        if (p1 < 1 || p1 > 8) goto bad;
        if (obj != Py_None) {
            if (!PyTuple_CheckExact(obj)) goto bad;
            c->nlabels = PyTuple_GET_SIZE(obj);
        }
        break;
    case K_READER:
        if (!PyCallable_Check(obj)) goto bad;
        break;
    default:
        goto bad;
    }
    Py_INCREF(obj);
    c->obj = obj;
    return 0;
bad:
    PyErr_Format(PyExc_ValueError, "unsupported column spec (kind %lld)", kind);
    return -1;
}

static PyObject *Plan_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *names, *specs, *keep = Py_None;
    if (kwds && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Plan takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!O!|O", &PyTuple_Type, &names, &PyTuple_Type, &specs, &keep)) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    if (PyTuple_GET_SIZE(specs) != n || n == 0) {
        PyErr_SetString(PyExc_ValueError, "names and specs differ in length, or no columns");
        return NULL;
    }
    if (keep != Py_None && (!PyTuple_Check(keep) || PyTuple_GET_SIZE(keep) != n)) {
        PyErr_SetString(PyExc_ValueError, "keep must be None or a tuple of flags, one per column");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(names, i))) {
            PyErr_SetString(PyExc_TypeError, "column names must be str");
            return NULL;
        }
    }
    Plan *self = (Plan *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->cols = PyMem_Calloc((size_t)n, sizeof(Col));
    if (self->cols == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    self->ncols = n;
    self->nullbytes = (n + 7) / 8;
    Py_INCREF(names);
    self->names = names;
    self->kept = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (plan_col(&self->cols[i], PyTuple_GET_ITEM(specs, i)) < 0) {
            Py_DECREF(self);
            return NULL;
        }
        if (keep != Py_None) {
            int truth = PyObject_IsTrue(PyTuple_GET_ITEM(keep, i));
            if (truth < 0) {
                Py_DECREF(self);
                return NULL;
            }
            self->cols[i].skip = !truth;
            self->kept -= !truth;
        }
    }
    return (PyObject *)self;
}

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "airflow_provider_binlog.binlog._rowdecode.Plan",
    .tp_doc = "Plan(names, specs[, keep]): how to decode row images with one columns-present bitmap "
              "(keep: a flag per column, false to read past the column and leave it out of the image).",
    .tp_basicsize = sizeof(Plan),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = Plan_new,
    .tp_dealloc = (destructor)Plan_dealloc,
};

/* ------------------------------------------------------------------------------------------ */
/* value readers: return a new reference, or NULL to bail out (any exception is cleared later) */

static inline uint64_t le(const uint8_t *b, Py_ssize_t n) {
    uint64_t v = 0;
    for (Py_ssize_t k = n - 1; k >= 0; k--) v = (v << 8) | b[k];
    return v;
}

static inline uint64_t be(const uint8_t *b, Py_ssize_t n) {
    uint64_t v = 0;
    for (Py_ssize_t k = 0; k < n; k++) v = (v << 8) | b[k];
    return v;
}

static inline int days_in_month(long y, long m) {
    static const int dim[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) return 29;
    return dim[m];
}

/* the checks datetime.date()/datetime() make (they raise ValueError; C declines the event) */
static inline int valid_date(long y, long m, long d) {
    return y >= 1 && y <= 9999 && m >= 1 && m <= 12 && d >= 1 && d <= days_in_month(y, m);
}

static PyObject *read_decimal(const Col *c, const uint8_t *src) {
    uint8_t d[32];
    char out[96];
    char *o = out;
    int size = c->size;
    memcpy(d, src, (size_t)size);
    int neg = !(d[0] & 0x80);
    if (neg)
        for (int k = 0; k < size; k++) d[k] ^= 0xFF;
    d[0] ^= 0x80;
    const uint8_t *q = d;
    char digits[80];
    int nd = 0;
    if (c->i_rem) {
        int w = DIG2BYTES[c->i_rem];
        uint32_t g = (uint32_t)be(q, w);
        q += w;
        if (g >= POW10[c->i_rem]) return NULL;
        for (int k = c->i_rem - 1; k >= 0; k--) digits[nd++] = (char)('0' + (g / POW10[k]) % 10);
    }
    for (int j = 0; j < c->i_full; j++) {
        uint32_t g = (uint32_t)be(q, 4);
        q += 4;
        if (g >= 1000000000u) return NULL;
        for (int k = 8; k >= 0; k--) digits[nd++] = (char)('0' + (g / POW10[k]) % 10);
    }
    if (neg) *o++ = '-';
    int lead = 0;
    while (lead < nd - 1 && digits[lead] == '0') lead++;
    if (nd == 0) {
        *o++ = '0';
    } else {
        memcpy(o, digits + lead, (size_t)(nd - lead));
        o += nd - lead;
    }
    if (c->p2) {
        *o++ = '.';
        for (int j = 0; j < c->f_full; j++) {
            uint32_t g = (uint32_t)be(q, 4);
            q += 4;
            if (g >= 1000000000u) return NULL;
            for (int k = 8; k >= 0; k--) *o++ = (char)('0' + (g / POW10[k]) % 10);
        }
        if (c->f_rem) {
            int w = DIG2BYTES[c->f_rem];
            uint32_t g = (uint32_t)be(q, w);
            if (g >= POW10[c->f_rem]) return NULL;
            for (int k = c->f_rem - 1; k >= 0; k--) *o++ = (char)('0' + (g / POW10[k]) % 10);
        }
    }
    PyObject *s = PyUnicode_FromStringAndSize(out, o - out);
    if (s == NULL) return NULL;
    PyObject *v = PyObject_CallOneArg(DecimalType, s);
    Py_DECREF(s);
    return v;
}

static PyObject *read_text(const Col *c, const char *s, Py_ssize_t n) {
    switch (c->p2) {
    case TXT_BYTES:
        return PyBytes_FromStringAndSize(s, n);
    case TXT_UTF8:
        return PyUnicode_DecodeUTF8(s, n, "strict");
    case TXT_CHARMAP:
        return PyUnicode_DecodeCharmap(s, n, c->obj, "strict");
    case TXT_CODEC:
        return PyUnicode_Decode(s, n, c->codec, "strict");
    default: { /* TXT_PAD */
        if (n >= c->p3) return PyBytes_FromStringAndSize(s, n);
        PyObject *v = PyBytes_FromStringAndSize(NULL, c->p3);
        if (v == NULL) return NULL;
        char *w = PyBytes_AS_STRING(v);
        memcpy(w, s, (size_t)n);
        memset(w + n, 0, (size_t)(c->p3 - n));
        return v;
    }
    }
}

static PyObject *read_set(const Col *c, uint64_t v) {
    if (c->obj == Py_None) return PyLong_FromUnsignedLongLong(v);
    Py_ssize_t nl = c->nlabels;
    if (nl < 64 && (v >> nl)) return NULL;
    PyObject *parts = PyList_New(0);
    if (parts == NULL) return NULL;
    for (Py_ssize_t k = 0; k < nl && k < 64; k++) {
        if (v >> k & 1) {
            if (PyList_Append(parts, PyTuple_GET_ITEM(c->obj, k)) < 0) {
                Py_DECREF(parts);
                return NULL;
            }
        }
    }
    PyObject *out = PyUnicode_Join(Comma, parts);
    Py_DECREF(parts);
    return out;
}

/* days since 1970-01-01 -> civil date (proleptic Gregorian) */
static void civil(int64_t z, long *y, long *m, long *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t yy = yoe + era * 400;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (long)(doy - (153 * mp + 2) / 5 + 1);
    *m = (long)(mp < 10 ? mp + 3 : mp - 9);
    *y = (long)(yy + (*m <= 2));
}

/* Read past a non-NULL value of a skipped column at *pp: 0, or -1 to bail out. Lengths only, no
 * value is built (nor its bytes checked: the column is not part of the image). */
static int skip_value(const Col *c, PyObject *body, const uint8_t *b, Py_ssize_t *pp, Py_ssize_t end) {
    Py_ssize_t p = *pp, n;
    switch (c->kind) {
    case K_NULL: n = 0; break;
    case K_INT: case K_UINT: case K_BIT: case K_ENUM: case K_SET: n = c->p1; break;
    case K_FLOAT: n = 4; break;
    case K_DOUBLE: n = 8; break;
    case K_YEAR: n = 1; break;
    case K_DATE: n = 3; break;
    case K_DATETIME2: n = 5 + c->p1; break;
    case K_TIMESTAMP2: n = 4 + c->p1; break;
    case K_TIME2: n = 3 + c->p1; break;
    case K_DECIMAL: n = c->size; break;
    case K_STR:
        if (c->p1 > end - p) return -1;
        n = (Py_ssize_t)le(b + p, c->p1);
        p += c->p1;
        break;
    default: { /* K_READER: only the reader knows the length */
        PyObject *pos = PyLong_FromSsize_t(p);
        if (pos == NULL) return -1;
        PyObject *res = PyObject_CallFunctionObjArgs(c->obj, body, pos, NULL);
        Py_DECREF(pos);
        if (res == NULL) return -1;
        Py_ssize_t np = -1;
        if (PyTuple_CheckExact(res) && PyTuple_GET_SIZE(res) == 2)
            np = PyLong_AsSsize_t(PyTuple_GET_ITEM(res, 1));
        Py_DECREF(res);
        if (np < p || np > end) return -1;
        *pp = np;
        return 0;
    }
    }
    if (n < 0 || n > end - p) return -1;
    *pp = p + n;
    return 0;
}

/* Decode one row image at *pp; a new dict, or NULL to bail out. */
static PyObject *decode_row(const Plan *plan, PyObject *body, const uint8_t *b, Py_ssize_t *pp,
                            Py_ssize_t end) {
    Py_ssize_t p = *pp;
    Py_ssize_t nb = plan->nullbytes;
    if (nb > end - p) return NULL;
    const uint8_t *nulls = b + p;
    p += nb;
#if PY_VERSION_HEX < 0x030D0000
    PyObject *row = _PyDict_NewPresized(plan->kept);
#else
    PyObject *row = PyDict_New();
#endif
    if (row == NULL) return NULL;
#define NEED(n) do { if ((Py_ssize_t)(n) > end - p) goto bail; } while (0)
    for (Py_ssize_t i = 0; i < plan->ncols; i++) {
        const Col *c = &plan->cols[i];
        PyObject *v;
        if (c->skip) {
            if (!(nulls[i >> 3] >> (i & 7) & 1) && skip_value(c, body, b, &p, end) < 0) goto bail;
            continue;
        }
        if (nulls[i >> 3] >> (i & 7) & 1) {
            v = Py_NewRef(Py_None);
        } else {
            switch (c->kind) {
            case K_NULL:
                v = Py_NewRef(Py_None);
                break;
            case K_INT: {
                Py_ssize_t w = c->p1;
                NEED(w);
                uint64_t u = le(b + p, w);
                p += w;
                int64_t s;
                if (w == 8) {
                    s = (int64_t)u;
                } else {
                    uint64_t sign = (uint64_t)1 << (8 * w - 1);
                    s = (int64_t)(u ^ sign) - (int64_t)sign;
                }
                v = PyLong_FromLongLong(s);
                break;
            }
            case K_UINT: {
                Py_ssize_t w = c->p1;
                NEED(w);
                v = PyLong_FromUnsignedLongLong(le(b + p, w));
                p += w;
                break;
            }
            case K_FLOAT: case K_DOUBLE: {
                Py_ssize_t w = c->kind == K_FLOAT ? 4 : 8;
                NEED(w);
                double x = w == 4 ? PyFloat_Unpack4((const char *)b + p, 1)
                                  : PyFloat_Unpack8((const char *)b + p, 1);
                p += w;
                v = (x == -1.0 && PyErr_Occurred()) ? NULL : PyFloat_FromDouble(x);
                break;
            }
            case K_YEAR: {
                NEED(1);
                long y = b[p];
                p += 1;
                v = PyLong_FromLong(y ? y + 1900 : 0);
                break;
            }
            case K_BIT:
                NEED(c->p1);
                v = PyLong_FromUnsignedLongLong(be(b + p, c->p1));
                p += c->p1;
                break;
            case K_STR: {
                NEED(c->p1);
                Py_ssize_t n = (Py_ssize_t)le(b + p, c->p1);
                p += c->p1;
                NEED(n);
                v = read_text(c, (const char *)b + p, n);
                p += n;
                break;
            }
            case K_DATE: {
                NEED(3);
                uint32_t x = (uint32_t)le(b + p, 3);
                p += 3;
                long y = (long)(x >> 9), m = (long)((x >> 5) & 15), d = (long)(x & 31);
                if (!valid_date(y, m, d)) goto bail; /* an invalid date: Python's InvalidDate */
                v = PyDate_FromDate((int)y, (int)m, (int)d);
                break;
            }
            case K_DATETIME2: {
                Py_ssize_t n = c->p1;
                NEED(5 + n);
                uint64_t raw = be(b + p, 5 + n);
                p += 5 + n;
                long us = n ? (long)(raw & (((uint64_t)1 << (8 * n)) - 1)) * FRAC_MULT[n] : 0;
                int64_t x = (int64_t)(raw >> (8 * n)) - (int64_t)0x8000000000LL;
                int64_t ym = x >> 22;
                long y = (long)(ym / 13), m = (long)(ym % 13), d = (long)((x >> 17) & 31);
                long hh = (long)((x >> 12) & 31), mi = (long)((x >> 6) & 63), ss = (long)(x & 63);
                if (x >= 0 && valid_date(y, m, d) && hh < 24 && mi < 60 && ss < 60 && us < 1000000)
                    v = PyDateTime_FromDateAndTime((int)y, (int)m, (int)d, (int)hh, (int)mi, (int)ss, (int)us);
                else
                    goto bail; /* an invalid date: Python's InvalidDate */
                break;
            }
            case K_TIMESTAMP2: {
                Py_ssize_t n = c->p1;
                NEED(4 + n);
                uint64_t raw = be(b + p, 4 + n);
                p += 4 + n;
                if (raw == 0) goto bail; /* the zero TIMESTAMP: Python's InvalidDate */
                int64_t secs = (int64_t)(raw >> (8 * n));
                int64_t us = n ? (int64_t)(raw & (((uint64_t)1 << (8 * n)) - 1)) * FRAC_MULT[n] : 0;
                secs += us / 1000000;
                us %= 1000000;
                int64_t days = secs / 86400, sod = secs % 86400;
                long y, m, d;
                civil(days, &y, &m, &d);
                v = PyDateTimeAPI->DateTime_FromDateAndTime(
                    (int)y, (int)m, (int)d, (int)(sod / 3600), (int)(sod / 60 % 60), (int)(sod % 60),
                    (int)us, PyDateTime_TimeZone_UTC, PyDateTimeAPI->DateTimeType);
                break;
            }
            case K_TIME2: {
                Py_ssize_t n = c->p1;
                NEED(3 + n);
                int64_t raw = (int64_t)be(b + p, 3 + n);
                p += 3 + n;
                int64_t val = raw - ((int64_t)0x800000 << (8 * n));
                int64_t a = val < 0 ? -val : val;
                int64_t frac = n ? (a & (((int64_t)1 << (8 * n)) - 1)) * FRAC_MULT[n] : 0;
                int64_t hms = a >> (8 * n);
                int64_t total = ((((hms >> 12) & 0x3FF) * 60 + ((hms >> 6) & 63)) * 60 + (hms & 63)) *
                                    1000000LL + frac;
                if (val < 0) total = -total;
                int64_t secs = total >= 0 ? total / 1000000 : -((-total + 999999) / 1000000);
                int64_t rem_us = total - secs * 1000000;
                int64_t days = secs >= 0 ? secs / 86400 : -((-secs + 86399) / 86400);
                int64_t rem_s = secs - days * 86400;
                v = PyDelta_FromDSU((int)days, (int)rem_s, (int)rem_us);
                break;
            }
            case K_DECIMAL:
                NEED(c->size);
                v = read_decimal(c, b + p);
                p += c->size;
                break;
            case K_ENUM: {
                NEED(c->p1);
                uint64_t x = le(b + p, c->p1);
                p += c->p1;
                if (c->obj == Py_None) {
                    v = PyLong_FromUnsignedLongLong(x);
                } else if (x == 0) {
                    v = Py_NewRef(EmptyStr);
                } else if (x > (uint64_t)c->nlabels) {
                    v = NULL;
                } else {
                    v = Py_NewRef(PyTuple_GET_ITEM(c->obj, (Py_ssize_t)x - 1));
                }
                break;
            }
            case K_SET: {
                NEED(c->p1);
                uint64_t x = le(b + p, c->p1);
                p += c->p1;
                v = read_set(c, x);
                break;
            }
            default: { /* K_READER */
                PyObject *pos = PyLong_FromSsize_t(p);
                if (pos == NULL) goto bail;
                PyObject *res = PyObject_CallFunctionObjArgs(c->obj, body, pos, NULL);
                Py_DECREF(pos);
                if (res == NULL) goto bail;
                if (!PyTuple_CheckExact(res) || PyTuple_GET_SIZE(res) != 2) {
                    Py_DECREF(res);
                    goto bail;
                }
                Py_ssize_t np = PyLong_AsSsize_t(PyTuple_GET_ITEM(res, 1));
                if (np < p || np > end) { /* includes the -1 of a conversion error */
                    Py_DECREF(res);
                    goto bail;
                }
                p = np;
                v = Py_NewRef(PyTuple_GET_ITEM(res, 0));
                Py_DECREF(res);
                break;
            }
            }
            if (v == NULL) goto bail;
        }
        int rc = PyDict_SetItem(row, PyTuple_GET_ITEM(plan->names, i), v);
        Py_DECREF(v);
        if (rc < 0) goto bail;
    }
#undef NEED
    *pp = p;
    return row;
bail:
    Py_DECREF(row);
    return NULL;
}

static int bounds(PyObject *body, Py_ssize_t pos, Py_ssize_t end) {
    return PyBytes_CheckExact(body) && pos >= 0 && pos <= end && end <= PyBytes_GET_SIZE(body);
}

static PyObject *bail_out(PyObject *list) {
    Py_XDECREF(list);
    PyErr_Clear();
    Py_RETURN_NONE;
}

static PyObject *decode_rows(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyObject_TypeCheck(args[0], &PlanType)) {
        PyErr_SetString(PyExc_TypeError, "decode_rows(plan, body, pos, end)");
        return NULL;
    }
    const Plan *plan = (const Plan *)args[0];
    PyObject *body = args[1];
    Py_ssize_t pos = PyLong_AsSsize_t(args[2]), end = PyLong_AsSsize_t(args[3]);
    if (PyErr_Occurred()) return NULL;
    if (!bounds(body, pos, end)) Py_RETURN_NONE;
    const uint8_t *b = (const uint8_t *)PyBytes_AS_STRING(body);
    PyObject *rows = PyList_New(0);
    if (rows == NULL) return NULL;
    while (pos < end) {
        PyObject *row = decode_row(plan, body, b, &pos, end);
        if (row == NULL) return bail_out(rows);
        int rc = PyList_Append(rows, row);
        Py_DECREF(row);
        if (rc < 0) return bail_out(rows);
    }
    return rows;
}

static PyObject *decode_pairs(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyObject_TypeCheck(args[0], &PlanType) || !PyObject_TypeCheck(args[1], &PlanType)) {
        PyErr_SetString(PyExc_TypeError, "decode_pairs(before_plan, after_plan, body, pos, end)");
        return NULL;
    }
    const Plan *before = (const Plan *)args[0], *after = (const Plan *)args[1];
    PyObject *body = args[2];
    Py_ssize_t pos = PyLong_AsSsize_t(args[3]), end = PyLong_AsSsize_t(args[4]);
    if (PyErr_Occurred()) return NULL;
    if (!bounds(body, pos, end)) Py_RETURN_NONE;
    const uint8_t *b = (const uint8_t *)PyBytes_AS_STRING(body);
    PyObject *rows = PyList_New(0);
    if (rows == NULL) return NULL;
    while (pos < end) {
        PyObject *bi = decode_row(before, body, b, &pos, end);
        if (bi == NULL) return bail_out(rows);
        PyObject *ai = decode_row(after, body, b, &pos, end);
        if (ai == NULL) {
            Py_DECREF(bi);
            return bail_out(rows);
        }
        PyObject *pair = PyTuple_Pack(2, bi, ai);
        Py_DECREF(bi);
        Py_DECREF(ai);
        if (pair == NULL) return bail_out(rows);
        int rc = PyList_Append(rows, pair);
        Py_DECREF(pair);
        if (rc < 0) return bail_out(rows);
    }
    return rows;
}

/* ------------------------------------------------------------------ records
 *
 * record_plan(cls, names) and records(plan, values, rows, mode, key_cls, key_prefix, slots): the
 * objects a rows event becomes downstream (canal's RowChange, one per row) built without running
 * their Python __init__, which costs more per row than decoding a short row in C.
 *
 * A record plan holds the offsets of the named __slots__ of `cls` (object slots, writable, of
 * `cls` itself); it must name every slot, so no attribute of a record is left unset. records()
 * builds one object per row: every slot from `values` (a tuple in the plan's order) except three,
 * given by `slots` = (before, after, key) indexes: mode 0 takes (before, after) from a row that
 * is a 2-tuple, mode 1 takes the row as the after image (before None), mode 2 as the before image
 * (after None); the key slot gets key_cls(*key_prefix, row_index) (key_cls a tuple subclass,
 * key_prefix a 3-tuple). Unlike the decoders above, bad arguments raise TypeError/ValueError: they
 * are a caller's bug, not bad bytes.
 *
 * The records and their keys are not tracked by the cyclic garbage collector (when the key prefix
 * holds ints only), as CPython does not track a tuple or dict of atoms: a record must never become
 * part of a reference cycle (RowChange is read-only by contract; its values never refer back to
 * it). Each row otherwise added two tracked objects to every young collection, and the store's
 * thousands of buffered changes to the older ones: ~25% of the parser thread's CPU.
 */
#include "../_slots.h"

#define RECORD_PLAN "_rowdecode.RecordPlan"

typedef struct {
    PyTypeObject *cls;
    Py_ssize_t n;
    Py_ssize_t off[1];
} RecordPlan;

static void record_plan_free(PyObject *capsule) {
    RecordPlan *p = (RecordPlan *)PyCapsule_GetPointer(capsule, RECORD_PLAN);
    if (p != NULL) {
        Py_XDECREF(p->cls);
        PyMem_Free(p);
    }
}

static PyObject *record_plan(PyObject *mod, PyObject *args) {
    PyObject *cls, *names;
    if (!PyArg_ParseTuple(args, "O!O!:record_plan", &PyType_Type, &cls, &PyTuple_Type, &names)) return NULL;
    PyTypeObject *type = (PyTypeObject *)cls;
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    if (n < 1 || type->tp_itemsize != 0 || type->tp_dictoffset != 0 ||
        (Py_ssize_t)(sizeof(PyObject) + n * sizeof(PyObject *)) != type->tp_basicsize) {
        PyErr_SetString(PyExc_ValueError, "record_plan: cls must have exactly these __slots__ and no __dict__");
        return NULL;
    }
    RecordPlan *p = PyMem_Malloc(sizeof(RecordPlan) + n * sizeof(Py_ssize_t));
    if (p == NULL) return PyErr_NoMemory();
    p->cls = NULL;
    p->n = n;
    for (Py_ssize_t j = 0; j < n; j++) {
        Py_ssize_t offset = slot_offset(type, PyTuple_GET_ITEM(names, j));
        if (offset < 0) {
            PyMem_Free(p);
            return NULL;
        }
        for (Py_ssize_t k = 0; k < j; k++) {
            if (p->off[k] == offset) {
                PyMem_Free(p);
                PyErr_SetString(PyExc_ValueError, "record_plan: a slot is named twice");
                return NULL;
            }
        }
        p->off[j] = offset;
    }
    Py_INCREF(cls);
    p->cls = type;
    PyObject *capsule = PyCapsule_New(p, RECORD_PLAN, record_plan_free);
    if (capsule == NULL) {
        Py_DECREF(cls);
        PyMem_Free(p);
    }
    return capsule;
}

static PyObject *records(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    const char *usage = "records(plan, values, rows, mode, key_cls, key_prefix, (before, after, key))";
    if (nargs != 7 || !PyTuple_Check(args[1]) || !PyList_Check(args[2]) || !PyType_Check(args[4]) ||
        !PyTuple_Check(args[5]) || PyTuple_GET_SIZE(args[5]) != 3 || !PyTuple_Check(args[6]) ||
        PyTuple_GET_SIZE(args[6]) != 3) {
        PyErr_SetString(PyExc_TypeError, usage);
        return NULL;
    }
    RecordPlan *p = (RecordPlan *)PyCapsule_GetPointer(args[0], RECORD_PLAN);
    if (p == NULL) return NULL;
    PyObject *values = args[1], *rows = args[2], *prefix = args[5];
    PyTypeObject *key_cls = (PyTypeObject *)args[4];
    long mode = PyLong_AsLong(args[3]);
    Py_ssize_t bi = PyLong_AsSsize_t(PyTuple_GET_ITEM(args[6], 0));
    Py_ssize_t ai = PyLong_AsSsize_t(PyTuple_GET_ITEM(args[6], 1));
    Py_ssize_t ki = PyLong_AsSsize_t(PyTuple_GET_ITEM(args[6], 2));
    if (PyErr_Occurred()) return NULL;
    Py_ssize_t n = p->n;
    if (PyTuple_GET_SIZE(values) != n || mode < 0 || mode > 2 || bi < 0 || bi >= n || ai < 0 || ai >= n ||
        ki < 0 || ki >= n || bi == ai || bi == ki || ai == ki || !PyType_IsSubtype(key_cls, &PyTuple_Type) ||
        key_cls->tp_itemsize != (Py_ssize_t)sizeof(PyObject *)) {
        PyErr_SetString(PyExc_ValueError, usage);
        return NULL;
    }
    /* ints only in the key: neither it nor (by the records' contract) a record can be in a cycle */
    int untrack = 1;
    for (int k = 0; k < 3; k++) untrack &= PyLong_CheckExact(PyTuple_GET_ITEM(prefix, k));
    Py_ssize_t count = PyList_GET_SIZE(rows);
    PyObject *out = PyList_New(count);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i), *before, *after;
        if (mode == 0) {
            if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 2) {
                Py_DECREF(out);
                PyErr_SetString(PyExc_TypeError, "records: mode 0 takes (before, after) tuples");
                return NULL;
            }
            before = PyTuple_GET_ITEM(row, 0);
            after = PyTuple_GET_ITEM(row, 1);
        } else {
            before = mode == 1 ? Py_None : row;
            after = mode == 1 ? row : Py_None;
        }
        PyObject *index = PyLong_FromSsize_t(i);
        PyObject *key = index == NULL ? NULL : key_cls->tp_alloc(key_cls, 4);
        if (key == NULL) {
            Py_XDECREF(index);
            Py_DECREF(out);
            return NULL;
        }
        for (int k = 0; k < 3; k++) PyTuple_SET_ITEM(key, k, Py_NewRef(PyTuple_GET_ITEM(prefix, k)));
        PyTuple_SET_ITEM(key, 3, index);
        PyObject *obj = p->cls->tp_alloc(p->cls, 0);
        if (obj == NULL) {
            Py_DECREF(key);
            Py_DECREF(out);
            return NULL;
        }
        for (Py_ssize_t j = 0; j < n; j++) {
            PyObject *v = j == bi ? before : j == ai ? after : j == ki ? key : PyTuple_GET_ITEM(values, j);
            *(PyObject **)((char *)obj + p->off[j]) = Py_NewRef(v);
        }
        if (untrack) {
            PyObject_GC_UnTrack(key);
            PyObject_GC_UnTrack(obj);
        }
        Py_DECREF(key);
        PyList_SET_ITEM(out, i, obj);
    }
    return out;
}

static PyObject *setup(PyObject *mod, PyObject *decimal_type) {
    Py_INCREF(decimal_type);
    Py_XSETREF(DecimalType, decimal_type);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"decode_rows", (PyCFunction)(void (*)(void))decode_rows, METH_FASTCALL,
     "decode_rows(plan, body, pos, end) -> list of row dicts, or None (decode with Python instead)"},
    {"decode_pairs", (PyCFunction)(void (*)(void))decode_pairs, METH_FASTCALL,
     "decode_pairs(before, after, body, pos, end) -> list of (before, after) dicts, or None"},
    {"record_plan", record_plan, METH_VARARGS,
     "record_plan(cls, slot_names) -> a plan for records(): the offsets of every slot of cls"},
    {"records", (PyCFunction)(void (*)(void))records, METH_FASTCALL,
     "records(plan, values, rows, mode, key_cls, key_prefix, (before, after, key)) -> list of objects"},
    {"setup", setup, METH_O, "setup(Decimal): the Decimal type to build DECIMAL values with"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_rowdecode", "C fast path of the row decoder (see values.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__rowdecode(void) {
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL) return NULL;
    if (PyType_Ready(&PlanType) < 0) return NULL;
    EmptyStr = PyUnicode_FromString("");
    Comma = PyUnicode_FromString(",");
    if (EmptyStr == NULL || Comma == NULL) return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL) return NULL;
    Py_INCREF(&PlanType);
    if (PyModule_AddObject(m, "Plan", (PyObject *)&PlanType) < 0) {
        Py_DECREF(&PlanType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
