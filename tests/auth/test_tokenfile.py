"""Static token files in upstream's CSV format."""
from __future__ import annotations

import os

from twisted.trial import unittest

from kapiserver.auth.tokenfile import TokenFileError, load_token_file, parse_token_csv


class TokenFileTests(unittest.TestCase):
    def write(self, text: str) -> str:
        path = os.path.abspath(self.mktemp())
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_users_with_quoted_group_lists(self) -> None:
        users = parse_token_csv('t1,alice,u-1,"dev,ops"\n\nt2,bob,u-2\nt3,carol,u-3,admins,ignored\n', "f")
        self.assertEqual((users["t1"].name, users["t1"].uid, users["t1"].groups), ("alice", "u-1", ("dev", "ops")))
        self.assertEqual((users["t2"].name, users["t2"].groups), ("bob", ()))
        self.assertEqual(users["t3"].groups, ("admins",))

    def test_later_duplicate_wins_and_empty_tokens_are_skipped(self) -> None:
        users = parse_token_csv("t,first,1\nt,second,2\n,nobody,3\n", "f")
        self.assertEqual(list(users), ["t"])
        self.assertEqual(users["t"].name, "second")

    def test_short_record_is_a_one_line_error(self) -> None:
        with self.assertRaises(TokenFileError) as cm:
            parse_token_csv("t,alice\n", "/etc/tokens.csv")
        self.assertEqual(str(cm.exception), "/etc/tokens.csv: token file must have at least 3 columns "
                                            "(token, user name, user uid), found 2")

    def test_authenticates_only_known_tokens(self) -> None:
        auth = load_token_file(self.write('secret,alice,1,"g1"\n'))
        result = auth.authenticate_token("secret", ())
        self.assertEqual((result.user.name, result.user.groups), ("alice", ("g1",)))
        self.assertIsNone(auth.authenticate_token("secreT", ()))
        self.assertIsNone(auth.authenticate_token("", ()))

    def test_missing_file(self) -> None:
        path = os.path.abspath(self.mktemp())
        with self.assertRaises(TokenFileError) as cm:
            load_token_file(path)
        self.assertEqual(str(cm.exception), f"{path}: token file not found")
