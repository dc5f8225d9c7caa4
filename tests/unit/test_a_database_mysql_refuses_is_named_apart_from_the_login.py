"""MySQL's and MariaDB's refusal of the database is named apart from a refused login.

Contract: error 1044 (``Access denied for user ... to database ...``: the database does
not exist, or the user may not use it; both servers answer both alike) is a mistake in
the URL's database or the user's rights, and ``refusal`` says to check those; 1045 (a
wrong password) and 1698 (the user's plugin) say to check the user and password.
"""

from __future__ import annotations

import pymysql
import pytest

from app.db.refusal import refusal

URL = "mysql://app:pw-never-shown@127.0.0.1:3306/orders"


def test_a_database_refused_names_the_database() -> None:
    said = "Access denied for user 'app'@'%' to database 'ordrs'"

    line = refusal(pymysql.err.OperationalError(1044, said), URL)

    assert line == (
        f"it refused the database ({said}); check the database name in DATABASE_URL, and "
        "that the user may use it"
    )


@pytest.mark.parametrize("code", [1045, 1698])
def test_a_login_refused_names_the_user_and_password(code: int) -> None:
    said = "Access denied for user 'app'@'localhost' (using password: YES)"

    line = refusal(pymysql.err.OperationalError(code, said), URL)

    assert line == f"it refused the login ({said}); check the user and password of DATABASE_URL"
