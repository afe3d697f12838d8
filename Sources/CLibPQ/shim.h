// libpq for Swift. PG_DIAG_* are character-literal macros Swift does not import:
// they are re-exported as constants.
#pragma once
#include <libpq-fe.h>

static const int HERALD_PG_DIAG_SQLSTATE = 'C';
static const int HERALD_PG_DIAG_MESSAGE_PRIMARY = 'M';
static const int HERALD_PG_DIAG_MESSAGE_DETAIL = 'D';
static const int HERALD_PG_DIAG_MESSAGE_HINT = 'H';
static const int HERALD_PG_DIAG_CONSTRAINT_NAME = 'n';
