/* The offset of an object slot of a class (a __slots__ member), for C code that reads or writes
 * its instances without attribute lookups (binlog/_rowdecode.c, lake/_fold.c). */
#ifndef BINLOG_CDC_SLOTS_H
#define BINLOG_CDC_SLOTS_H

#include <Python.h>
#include <structmember.h>

/* -1 with a ValueError naming it when name is not a writable object slot of type itself */
static Py_ssize_t slot_offset(PyTypeObject *type, PyObject *name) {
    PyObject *d = PyObject_GetAttr((PyObject *)type, name); /* the member descriptor itself */
    PyErr_Clear();
    PyMemberDef *m = NULL;
    if (d != NULL && Py_IS_TYPE(d, &PyMemberDescr_Type) && ((PyDescrObject *)d)->d_type == type)
        m = ((PyMemberDescrObject *)d)->d_member; /* lives as long as type */
    Py_XDECREF(d);
    if (m == NULL || m->type != T_OBJECT_EX || (m->flags & READONLY) || m->offset < (Py_ssize_t)sizeof(PyObject) ||
        m->offset + (Py_ssize_t)sizeof(PyObject *) > type->tp_basicsize) {
        PyErr_Format(PyExc_ValueError, "%R is not a writable object slot of %s", name, type->tp_name);
        return -1;
    }
    return m->offset;
}

#endif
